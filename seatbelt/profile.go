package seatbelt

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// SandboxExec is the pinned path of sandbox-exec; it is never looked up
// in PATH.
const SandboxExec = "/usr/bin/sandbox-exec"

// ErrRejected is wrapped by the error FromSpec returns for a spec with
// fields macOS cannot honour.
var ErrRejected = errors.New("configuration cannot be honoured on darwin")

// RejectedError lists the rejected fields of a spec.
type RejectedError struct {
	Findings []Finding
}

// Error names every rejected field.
func (e *RejectedError) Error() string {
	parts := make([]string, len(e.Findings))
	for i, f := range e.Findings {
		parts[i] = f.Field + ": " + f.Detail
	}
	return ErrRejected.Error() + " (accept degradation to run it anyway): " + strings.Join(parts, "; ")
}

// Unwrap returns ErrRejected.
func (e *RejectedError) Unwrap() error { return ErrRejected }

// Options configure FromSpec.
type Options struct {
	// Bundle is the bundle directory: relative root.path and bind sources
	// are resolved against it.
	Bundle string
	// ScratchDir is the per-container directory tmpfs mounts are backed
	// by: mount i gets ScratchDir/tmpfs<i>. Required when the spec has
	// tmpfs mounts; the back end creates the directories
	// (Profile.ScratchDirs) and removes them with the container.
	ScratchDir string
	// FS is consulted to resolve symbolic links; nil means HostFS.
	FS FS
	// Caller is the identity the process will run as; nil means unknown
	// (process.user is then reported degraded).
	Caller *Caller
	// AcceptDegradation lets a spec with rejected fields through: the
	// fields are ignored and reported as warnings.
	AcceptDegradation bool
}

// Param is one sandbox-exec `-D KEY=VALUE` parameter.
type Param struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Rlimit is a resource limit to apply with setrlimit(2) before exec.
type Rlimit struct {
	// Type is the OCI name, e.g. "RLIMIT_NOFILE".
	Type string `json:"type"`
	Soft uint64 `json:"soft"`
	Hard uint64 `json:"hard"`
}

// Profile is a translated spec: the SBPL text, its parameters, and what
// the launcher must do before exec.
type Profile struct {
	// Text is the SBPL profile. It contains no path taken from the spec.
	Text string `json:"text"`
	// Params are the -D parameters the profile refers to, in order.
	Params []Param `json:"params"`
	// Args is the command to run (process.args).
	Args []string `json:"args"`
	// Env is the process environment (process.env, with TMPDIR pointed
	// at a scratch directory when a tmpfs mount stands for it).
	Env []string `json:"env"`
	// Cwd is the working directory to enter before exec.
	Cwd string `json:"cwd"`
	// Rlimits are the limits to set before exec.
	Rlimits []Rlimit `json:"rlimits,omitempty"`
	// Umask, when not nil, is set before exec.
	Umask *uint32 `json:"umask,omitempty"`
	// ScratchDirs are directories the back end creates (0700) before the
	// process starts and removes on delete.
	ScratchDirs []string `json:"scratchDirs,omitempty"`
	// Network is true when the profile allows network access.
	Network bool `json:"network"`
	// Report is the classification of the spec.
	Report Report `json:"report"`
}

// Command returns the argv that runs the profile stored at profileFile:
// sandbox-exec, -f, the file, the -D parameters, "--", then Args.
func (p *Profile) Command(profileFile string) []string {
	argv := []string{SandboxExec, "-f", profileFile}
	for _, prm := range p.Params {
		argv = append(argv, "-D", prm.Key+"="+prm.Value)
	}
	argv = append(argv, "--")
	return append(argv, p.Args...)
}

// Warning is a non-fatal translation problem: a degraded field, a rejected
// field let through by Options.AcceptDegradation, or a hint.
type Warning struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// String formats the warning as "field: message".
func (w Warning) String() string { return w.Field + ": " + w.Message }

// FromSpec translates s into a Seatbelt profile. The warnings list every
// degraded field (and, with Options.AcceptDegradation, every rejected one).
// A spec with rejected fields fails with a *RejectedError unless
// degradation is accepted.
func FromSpec(s *specs.Spec, o Options) (*Profile, []Warning, error) {
	if s == nil {
		return nil, nil, errors.New("translate spec: no configuration")
	}
	rep := classify(s, o.Caller).report()
	if rej := rep.Of(Rejected); len(rej) > 0 && !o.AcceptDegradation {
		return nil, nil, &RejectedError{Findings: rej}
	}
	if s.Process == nil || len(s.Process.Args) == 0 {
		return nil, nil, errors.New("translate spec: process.args must not be empty")
	}
	if s.Process.Cwd == "" || !path.IsAbs(s.Process.Cwd) {
		return nil, nil, fmt.Errorf("translate spec: process.cwd %q is not an absolute path", s.Process.Cwd)
	}
	b := &builder{opts: o, fsys: o.FS, grants: map[string]*grant{}, execs: map[string]bool{}}
	if b.fsys == nil {
		b.fsys = HostFS{}
	}
	p := &Profile{
		Args:   append([]string(nil), s.Process.Args...),
		Env:    append([]string(nil), s.Process.Env...),
		Cwd:    s.Process.Cwd,
		Umask:  s.Process.User.Umask,
		Report: rep,
	}
	if err := b.collect(s, p); err != nil {
		return nil, nil, fmt.Errorf("translate spec: %w", err)
	}
	var warns []Warning
	for _, f := range rep.Findings {
		if f.Class != Enforced {
			warns = append(warns, Warning{Field: f.Field, Message: string(f.Class) + ": " + f.Detail})
		}
	}
	warns = append(warns, b.warns...)
	p.Network = !networkDenied(s.Linux)
	p.Text, p.Params = b.render(p.Network)
	if err := CheckProfile(p.Text, p.Params); err != nil {
		return nil, nil, fmt.Errorf("translate spec: generated profile is malformed: %w", err)
	}
	return p, warns, nil
}

// networkDenied reports whether the spec asks for a network namespace
// (joining one by path counts: the only safe reading is no network).
func networkDenied(l *specs.Linux) bool {
	if l == nil {
		return false
	}
	for _, ns := range l.Namespaces {
		if ns.Type == specs.NetworkNamespace {
			return true
		}
	}
	return false
}

// grant is access to a directory tree.
type grant struct {
	write bool
	exec  bool
}

type builder struct {
	opts   Options
	fsys   FS
	grants map[string]*grant
	// execs are single files (the resolved args[0]) made readable and
	// executable.
	execs    map[string]bool
	masked   []string
	readonly []string
	warns    []Warning
}

func (b *builder) canonical(field, p string) (string, error) {
	if !path.IsAbs(p) {
		if b.opts.Bundle == "" || !path.IsAbs(b.opts.Bundle) {
			return "", fmt.Errorf("%s: relative path %q needs an absolute bundle directory", field, p)
		}
		p = b.opts.Bundle + "/" + p
	}
	c, err := Canonical(b.fsys, p)
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return c, nil
}

func (b *builder) add(p string, g grant) {
	cur, ok := b.grants[p]
	if !ok {
		b.grants[p] = &g
		return
	}
	cur.write = cur.write || g.write
	cur.exec = cur.exec || g.exec
}

// collect gathers every path the spec grants.
func (b *builder) collect(s *specs.Spec, p *Profile) error {
	if s.Root != nil && s.Root.Path != "" {
		r, err := b.canonical("root.path", s.Root.Path)
		if err != nil {
			return err
		}
		b.add(r, grant{write: !s.Root.Readonly, exec: true})
	}
	tmpdirIdx, rewriteTmpdir := tmpdirMount(s)
	for i, m := range s.Mounts {
		field := fmt.Sprintf("mounts[%d]", i)
		ro := readOnly(m.Options)
		g := grant{write: !ro, exec: !hasOption(m.Options, "noexec")}
		switch kindOf(m) {
		case mountBind:
			if m.Source == "" {
				return fmt.Errorf("%s: bind mount without a source", field)
			}
			src, err := b.canonical(field+".source", m.Source)
			if err != nil {
				return err
			}
			b.add(src, g)
		case mountTmpfs:
			if b.opts.ScratchDir == "" || !path.IsAbs(b.opts.ScratchDir) {
				return fmt.Errorf("%s: a tmpfs mount needs an absolute scratch directory", field)
			}
			dir := path.Join(b.opts.ScratchDir, fmt.Sprintf("tmpfs%d", i))
			p.ScratchDirs = append(p.ScratchDirs, dir)
			c, err := b.canonical(field, dir)
			if err != nil {
				return err
			}
			b.add(c, g)
			if rewriteTmpdir && i == tmpdirIdx {
				p.Env = setEnv(p.Env, "TMPDIR", c)
			}
		}
	}
	if err := b.interpreter(s.Process); err != nil {
		return err
	}
	if s.Linux != nil {
		for i, m := range s.Linux.MaskedPaths {
			c, err := b.canonical(fmt.Sprintf("linux.maskedPaths[%d]", i), m)
			if err != nil {
				return err
			}
			if b.readable(c) {
				b.masked = append(b.masked, c)
			}
		}
		for i, m := range s.Linux.ReadonlyPaths {
			c, err := b.canonical(fmt.Sprintf("linux.readonlyPaths[%d]", i), m)
			if err != nil {
				return err
			}
			if b.writable(c) {
				b.readonly = append(b.readonly, c)
			}
		}
	}
	// A read-only tree inside a writable one stays read-only.
	for d, g := range b.grants {
		if !g.write && b.writable(d) {
			b.readonly = append(b.readonly, d)
		}
	}
	for _, r := range s.Process.Rlimits {
		if _, apply := rlimitClass(r.Type); apply {
			p.Rlimits = append(p.Rlimits, Rlimit{Type: r.Type, Soft: r.Soft, Hard: r.Hard})
		}
	}
	if cwd, err := b.canonical("process.cwd", s.Process.Cwd); err != nil {
		return err
	} else if !b.readable(cwd) {
		b.warns = append(b.warns, Warning{Field: "process.cwd", Message: "not within a readable path: the process starts there but cannot list it, and getcwd(3) may fail"})
	}
	return nil
}

// interpreter makes the program the process starts readable and
// executable when it lies outside every granted tree: args[0] when
// absolute, else its first match in the PATH of process.env (execvp's
// search, done here through the FS).
func (b *builder) interpreter(proc *specs.Process) error {
	arg0 := proc.Args[0]
	var cands []string
	switch {
	case path.IsAbs(arg0):
		cands = []string{arg0}
	case strings.Contains(arg0, "/"):
		cands = []string{path.Join(proc.Cwd, arg0)}
	default:
		pathEnv := "/usr/bin:/bin"
		for _, e := range proc.Env {
			if v, ok := strings.CutPrefix(e, "PATH="); ok {
				pathEnv = v
			}
		}
		for _, d := range strings.Split(pathEnv, ":") {
			if path.IsAbs(d) {
				cands = append(cands, path.Join(d, arg0))
			}
		}
	}
	for _, cand := range cands {
		c, err := b.canonical("process.args[0]", cand)
		if err != nil {
			return err
		}
		mode, err := b.fsys.Lstat(c)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("process.args[0]: %w", err)
		}
		if !mode.IsRegular() || mode.Perm()&0o111 == 0 {
			continue
		}
		if !b.executable(c) {
			b.execs[c] = true
		}
		return nil
	}
	b.warns = append(b.warns, Warning{Field: "process.args[0]", Message: fmt.Sprintf("%q was not found as an executable file; it must lie within an executable granted path", arg0)})
	return nil
}

// readable reports whether p lies within a granted tree.
func (b *builder) readable(p string) bool {
	for d := range b.grants {
		if within(p, d) {
			return true
		}
	}
	return false
}

func (b *builder) writable(p string) bool {
	for d, g := range b.grants {
		if g.write && within(p, d) {
			return true
		}
	}
	return false
}

func (b *builder) executable(p string) bool {
	for d, g := range b.grants {
		if g.exec && within(p, d) {
			return true
		}
	}
	return b.execs[p]
}

// setEnv sets key=value in env, replacing every earlier definition.
func setEnv(env []string, key, value string) []string {
	out := env[:0:0]
	for _, e := range env {
		if !strings.HasPrefix(e, key+"=") {
			out = append(out, e)
		}
	}
	return append(out, key+"="+value)
}

// params assigns parameter keys to paths, in sorted order per role.
type params struct {
	list []Param
}

func (ps *params) add(prefix string, values []string) []string {
	keys := make([]string, len(values))
	for i, v := range values {
		keys[i] = fmt.Sprintf("%s_%d", prefix, i)
		ps.list = append(ps.list, Param{Key: keys[i], Value: v})
	}
	return keys
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func uniqSorted(in []string) []string {
	m := map[string]bool{}
	for _, s := range in {
		m[s] = true
	}
	return sorted(m)
}

// render writes the profile text and its parameters.
func (b *builder) render(network bool) (string, []Param) {
	var read, write []string
	for d, g := range b.grants {
		if g.write {
			write = append(write, d)
		} else {
			read = append(read, d)
		}
	}
	sort.Strings(read)
	sort.Strings(write)
	execs := sorted(b.execs)

	// Ancestors of everything granted, so lookups and getcwd work; "/"
	// and the base profile's own ancestors are static.
	static := map[string]bool{}
	for _, d := range baseMetadata() {
		static[d] = true
	}
	meta := map[string]bool{}
	for _, p := range append(append(append([]string(nil), read...), write...), execs...) {
		for _, a := range ancestors(p) {
			if !static[a] && !b.readable(a) {
				meta[a] = true
			}
		}
	}

	var ps params
	readKeys := ps.add("READ", read)
	writeKeys := ps.add("WRITE", write)
	execKeys := ps.add("EXEC", execs)
	metaKeys := ps.add("META", sorted(meta))
	maskKeys := ps.add("MASK", uniqSorted(b.masked))
	roKeys := ps.add("READONLY", uniqSorted(b.readonly))

	var w sbplWriter
	w.base()

	w.comment("granted by the configuration: root, mounts and the program itself")
	if len(metaKeys) > 0 {
		w.allow([]string{"file-read-metadata"}, paramFilters("literal", metaKeys), nil)
	}
	var readable, executable []string
	readable = append(readable, paramFilters("subpath", readKeys)...)
	readable = append(readable, paramFilters("subpath", writeKeys)...)
	readable = append(readable, paramFilters("literal", execKeys)...)
	for i, d := range read {
		if b.grants[d].exec {
			executable = append(executable, paramFilter("subpath", readKeys[i]))
		}
	}
	for i, d := range write {
		if b.grants[d].exec {
			executable = append(executable, paramFilter("subpath", writeKeys[i]))
		}
	}
	executable = append(executable, paramFilters("literal", execKeys)...)
	masked := paramFilters("subpath", maskKeys)
	if len(readable) > 0 {
		w.allow([]string{"file-read*"}, readable, masked)
	}
	if len(executable) > 0 {
		w.allow([]string{"process-exec", "file-map-executable"}, executable, masked)
	}
	if len(writeKeys) > 0 {
		w.allow([]string{"file-write*"}, paramFilters("subpath", writeKeys), append(masked, paramFilters("subpath", roKeys)...))
	}
	if network {
		w.network()
	} else {
		w.comment("no network: the configuration has a network namespace")
	}
	return w.String(), ps.list
}

func paramFilter(kind, key string) string {
	return "(" + kind + " (param " + quote(key) + "))"
}

func paramFilters(kind string, keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = paramFilter(kind, k)
	}
	return out
}
