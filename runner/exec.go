package runner

import (
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/skillrun/skillrun/internal/lazyre"
	"github.com/skillrun/skillrun/spec"
)

// interpreters whose first non-option argument is a script path.
var interpreterRE = lazyre.New(`^(python(3(\.\d+)?)?|node|bash|sh|dash)$`)

// resolveScript makes the commands skills' instructions write work from
// the workspace: a relative script argument of an interpreter
// (`python3 scripts/fill.py form.pdf`) that is not in the working folder
// but is in the skill's folder becomes the skill's copy
// (/skill/scripts/fill.py). ws is the host workspace ("" for none). It
// returns the command line and a note when it changed it.
func resolveScript(sk *spec.Skill, ws string, e spec.Exec) ([]string, string) {
	if sk.Dir == "" || len(e.Args) < 2 || !interpreterRE().MatchString(path.Base(e.Args[0])) {
		return e.Args, ""
	}
	cwd := e.Cwd
	if cwd == "" {
		cwd = spec.SkillMount
		if ws != "" {
			cwd = spec.WorkspaceMount
		}
	}
	var hostCwd string
	switch {
	case cwd == spec.WorkspaceMount || strings.HasPrefix(cwd, spec.WorkspaceMount+"/"):
		if ws == "" {
			return e.Args, ""
		}
		hostCwd = filepath.Join(ws, filepath.FromSlash(strings.TrimPrefix(cwd, spec.WorkspaceMount)))
	default:
		return e.Args, "" // in the skill's folder already, or elsewhere
	}
	i := scriptArg(e.Args)
	if i < 0 {
		return e.Args, ""
	}
	script := e.Args[i]
	clean := path.Clean(script)
	if path.IsAbs(script) || clean == ".." || strings.HasPrefix(clean, "../") {
		return e.Args, ""
	}
	if _, err := os.Lstat(filepath.Join(hostCwd, filepath.FromSlash(clean))); err == nil {
		return e.Args, ""
	}
	if fi, err := os.Stat(filepath.Join(sk.Dir, filepath.FromSlash(clean))); err != nil || !fi.Mode().IsRegular() {
		return e.Args, ""
	}
	args := append([]string(nil), e.Args...)
	args[i] = path.Join(spec.SkillMount, clean)
	return args, script + ": not in " + cwd + "; ran the skill's " + args[i]
}

// onExecPath reports whether name, a command's program, is found on the
// sandbox's PATH in a host folder bound there (spec.ExecPathDirs): the
// first folder that has the name holds a regular file anyone may
// execute. A name with a slash, or found nowhere there, or not so, is
// left to the shell wrapper, which reports it (exit 127 or 126) as a
// shell would.
func onExecPath(name string, env *spec.DepsEnv) bool {
	if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
		return false
	}
	for _, dir := range spec.ExecPathDirs(env) {
		fi, err := os.Stat(filepath.Join(dir[1], name))
		if err == nil {
			return fi.Mode().IsRegular() && fi.Mode().Perm()&0o001 != 0
		}
	}
	return false
}

// scriptArg is the index of the interpreter's script argument, or -1 when
// the interpreter runs code from elsewhere (-c, -m, -e).
func scriptArg(args []string) int {
	withValue := map[string]bool{"-W": true, "-X": true, "-r": true, "--require": true, "-o": true, "-O": true}
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-c", a == "-m", a == "-e", a == "-p", a == "--eval", a == "--print", a == "-":
			return -1
		case a == "--":
			if i+1 < len(args) {
				return i + 1
			}
			return -1
		case withValue[a]:
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return i
		}
	}
	return -1
}

// missingModuleRE find the module an interpreter failed to import.
var (
	pythonMissingRE = lazyre.New(`ModuleNotFoundError: No module named '([^']+)'`)
	nodeMissingRE   = lazyre.New(`Cannot find (?:module|package) '([^']+)'`)
)

// missingModule reads a failed run's stderr for a module its interpreter
// could not import, and says how to add it.
func missingModule(stderr []byte) (module, hint string) {
	if m := pythonMissingRE().FindSubmatch(stderr); m != nil {
		mod := string(m[1])
		top, _, _ := strings.Cut(mod, ".")
		return mod, "Python module \"" + mod + "\" is not installed in the sandbox: add its package to the skill's requirements.txt (at the top or in scripts/), or pass --with PACKAGE (the package that provides \"" + top + "\")"
	}
	if m := nodeMissingRE().FindSubmatch(stderr); m != nil {
		mod := string(m[1])
		if strings.HasPrefix(mod, ".") || strings.HasPrefix(mod, "/") {
			return "", "" // a file of the skill's, not a package
		}
		return mod, "Node module \"" + mod + "\" is not installed in the sandbox: add it to the skill's package.json (at the top or in scripts/), or pass --with npm:" + mod + "@VERSION"
	}
	return "", ""
}

// notFoundRE is the shell's report of a command it could not run (the
// exec'd command line runs under spec.ExecShell).
var notFoundRE = lazyre.New(`(?m)^sh: \d+: exec: (.+): (not found|Permission denied)$`)
