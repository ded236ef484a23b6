package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Entry point kinds.
const (
	KindPython = "python"
	KindNode   = "node"
	KindShell  = "shell"
	KindNative = "native"
)

// Entry is how a skill is started.
type Entry struct {
	// Path is the entry file relative to the skill folder (slash-separated).
	Path string `json:"path"`
	// Kind is python, node, shell or native.
	Kind string `json:"kind"`
	// Interpreter is the command that runs Path (empty for native
	// executables), looked up on the sandbox's PATH unless absolute.
	Interpreter []string `json:"interpreter,omitempty"`
	// Declared is true when the manifest names the entry point.
	Declared bool `json:"declared"`
}

// conventionalEntries are the entry points looked for, in this order,
// when the manifest declares none.
var conventionalEntries = []string{
	"scripts/main.py", "scripts/main.js", "scripts/main.mjs", "scripts/main.cjs", "scripts/main.sh", "scripts/main",
	"scripts/run.py", "scripts/run.js", "scripts/run.mjs", "scripts/run.cjs", "scripts/run.sh", "scripts/run",
	"main.py", "main.js", "main.mjs", "main.sh", "run.py", "run.js", "run.mjs", "run.sh",
}

// resolveEntry sets s.Entry from the manifest or by convention. The entry
// point is optional (the Agent Skills format has none): a skill without
// one is used through its scripts (skill exec) and its instructions. When
// the convention finds several candidates, none is picked and a warning
// says so.
func (s *Skill) resolveEntry() error {
	if p := s.Manifest.Entry; p != "" {
		p = path.Clean(filepath.ToSlash(p))
		e, err := classify(s.Dir, p)
		if err != nil {
			return fmt.Errorf("%s: entry: %w", ManifestFile, err)
		}
		e.Declared = true
		s.Entry = e
		return nil
	}
	var found []string
	for _, c := range conventionalEntries {
		if fi, err := os.Stat(filepath.Join(s.Dir, filepath.FromSlash(c))); err == nil && fi.Mode().IsRegular() {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return nil
	case 1:
	default:
		s.Warnings = append(s.Warnings, fmt.Sprintf("entry: several conventional entry points found (%s): none is the skill's entry point; declare one with \"entry:\" in %s to call the skill, or run any of them with skill exec", strings.Join(found, ", "), ManifestFile))
		return nil
	}
	e, err := classify(s.Dir, found[0])
	if err != nil {
		return fmt.Errorf("%s: %w", found[0], err)
	}
	s.Entry = e
	return nil
}

// HasEntry reports whether the skill has an entry point (declared or
// found by convention): only then can it be called (skill run, a tool of
// its own over MCP).
func (s *Skill) HasEntry() bool { return s.Entry.Path != "" }

// ErrNoEntry is matched (errors.Is) by NoEntryError's errors.
var ErrNoEntry = errors.New("no entry point")

// NoEntryError explains how to call a skill that has no entry point, or
// how to use it without one. It names the manifest only when the skill
// has one.
func (s *Skill) NoEntryError() error {
	conv := strings.Join(conventionalEntries[:6], ", ")
	if s.ManifestFile != "" {
		return fmt.Errorf("%s: entry: %w: declare one (entry: scripts/NAME.py) or add one of %s; or run one of the skill's scripts with skillrun skill exec DIR -- CMD", s.ManifestFile, ErrNoEntry, conv)
	}
	return fmt.Errorf("skill %q has %w (SKILL.md alone does not name one): run one of its scripts with skillrun skill exec DIR -- CMD, or add one of %s, or a %s with \"entry: PATH\"", s.Name, ErrNoEntry, conv, ManifestFile)
}

// classify picks the interpreter of the file rel in dir from its
// extension, its shebang, or its ELF header.
func classify(dir, rel string) (Entry, error) {
	e := Entry{Path: rel}
	full := filepath.Join(dir, filepath.FromSlash(rel))
	// The entry must stay inside the skill folder even through symlinks:
	// only the folder is visible in the sandbox.
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		return e, fmt.Errorf("%q: %w", rel, unwrapPath(err))
	}
	if real != dir && !strings.HasPrefix(real, dir+string(filepath.Separator)) {
		return e, fmt.Errorf("%q resolves outside the skill folder", rel)
	}
	// Never open a device or a FIFO (opening one can have effects); the
	// fstat below catches a swap after this check.
	if fi, err := os.Stat(real); err != nil {
		return e, fmt.Errorf("%q: %w", rel, unwrapPath(err))
	} else if !fi.Mode().IsRegular() {
		return e, fmt.Errorf("%q is not a regular file (%s)", rel, fileKind(fi.Mode()))
	}
	// O_NONBLOCK: a FIFO swapped in must not block Load.
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return e, fmt.Errorf("%q: %w", rel, unwrapPath(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return e, fmt.Errorf("%q: %w", rel, err)
	}
	if !fi.Mode().IsRegular() {
		return e, fmt.Errorf("%q is not a regular file (%s)", rel, fileKind(fi.Mode()))
	}
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	switch strings.ToLower(path.Ext(rel)) {
	case ".py":
		e.Kind, e.Interpreter = KindPython, clone(pythonCmd)
		return e, nil
	case ".js", ".mjs", ".cjs":
		e.Kind, e.Interpreter = KindNode, []string{"node"}
		return e, nil
	case ".sh":
		e.Kind, e.Interpreter = KindShell, []string{"sh"}
		if sb := shebang(head); len(sb) > 0 && strings.HasSuffix(sb[len(sb)-1], "bash") {
			e.Interpreter = []string{"bash"}
		}
		return e, nil
	case ".bash":
		e.Kind, e.Interpreter = KindShell, []string{"bash"}
		return e, nil
	}
	if bytes.HasPrefix(head, []byte("\x7fELF")) {
		if fi.Mode().Perm()&0o111 == 0 {
			return e, fmt.Errorf("%q is an ELF executable without execute permission", rel)
		}
		e.Kind = KindNative
		return e, nil
	}
	sb := shebang(head)
	if len(sb) == 0 {
		return e, fmt.Errorf("%q: cannot tell how to run it (use a .py, .js, .mjs or .sh extension, a #! line, or an executable)", rel)
	}
	prog := path.Base(sb[0])
	args := sb[1:]
	if prog == "env" {
		// #!/usr/bin/env [-S] prog args
		if len(args) > 0 && args[0] == "-S" {
			args = args[1:]
		}
		if len(args) == 0 {
			return e, fmt.Errorf("%q: #! line names env without a program", rel)
		}
		prog, args = args[0], args[1:]
	} else {
		prog = sb[0]
	}
	switch base := path.Base(prog); {
	case strings.HasPrefix(base, "python"):
		e.Kind = KindPython
		e.Interpreter = append(append([]string{prog}, pythonCmd[1:]...), args...)
	case base == "node" || base == "nodejs":
		e.Kind = KindNode
		e.Interpreter = append([]string{prog}, args...)
	case base == "sh" || base == "bash" || base == "dash":
		e.Kind = KindShell
		e.Interpreter = append([]string{prog}, args...)
	default:
		return e, fmt.Errorf("%q: unsupported interpreter %q in #! line", rel, prog)
	}
	return e, nil
}

// pythonCmd runs Python without writing bytecode (-B), without the user
// site directory (-s) and ignoring PYTHON* variables (-E). -I is not used:
// it drops the script's folder from sys.path, which skills rely on.
var pythonCmd = []string{"python3", "-B", "-s", "-E"}

// shebang returns the fields of a "#!" first line, or nil.
func shebang(head []byte) []string {
	if !bytes.HasPrefix(head, []byte("#!")) {
		return nil
	}
	line := head[2:]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	return strings.Fields(string(line))
}

// unwrapPath drops the *PathError's absolute path, which names a host
// location the caller did not write.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
