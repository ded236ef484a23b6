package spec

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Exec is a command run in a skill's sandbox instead of its entry point
// (skill exec), or in a sandbox without a skill (Bare): one of the
// skill's scripts with arguments, or a tool on the workspace.
type Exec struct {
	// Args is the command line; Args[0] is looked up on the sandbox's
	// PATH, where the skill's dependency environment comes first.
	Args []string
	// Cwd is the working directory, WorkspaceMount or SkillMount or a
	// folder below one of them; "" is WorkspaceMount when there is a
	// workspace, else SkillMount (ScratchMount for a sandbox without a
	// skill or workspace).
	Cwd string
	// Direct says the caller found Args[0] executable on the sandbox's
	// PATH: the command is exec'd as it is, without ExecShell (one
	// process start less).
	Direct bool
}

// WithExec runs e instead of the skill's entry point. Unless e.Direct,
// the command runs under `/bin/sh -c 'exec "$@"'`, so that a command that
// does not exist or cannot be executed ends as a shell's does (status 127
// or 126, one line on stderr naming it) rather than as a runtime error.
func WithExec(e Exec) Option {
	return func(o *options) { c := e; c.Args = clone(e.Args); o.exec = &c }
}

// ExecShell is the prefix of an exec'd command line (see WithExec).
var ExecShell = []string{"/bin/sh", "-c", `exec "$@"`, "sh"}

// Bare is the skill of a sandbox without one (skillrun sandbox): no
// folder at /skill, no manifest, no entry point; it runs commands only.
func Bare() *Skill {
	return &Skill{Name: BareName, Description: "a one-off sandbox without a skill",
		Input: Input{Schema: defaultSchema, Source: SchemaDefault, Mode: InputStdin}}
}

// BareName is the name of Bare's skill (container IDs "skill-sandbox-...").
const BareName = "sandbox"

// execCwd checks e's working directory against the sandbox's folders and
// returns it, the default filled in.
func execCwd(s *Skill, p *Policy, e *Exec) (string, error) {
	if e.Cwd == "" {
		switch {
		case p.Workspace != "":
			return WorkspaceMount, nil
		case s.Dir != "":
			return SkillMount, nil
		}
		return ScratchMount, nil
	}
	c := e.Cwd
	// A sandbox without a skill (Bare) has no /skill to start in.
	folders := SkillMount + " or " + WorkspaceMount
	if s.Dir == "" {
		folders = WorkspaceMount
	}
	if !path.IsAbs(c) || path.Clean(c) != c {
		return "", fmt.Errorf("--cwd: %q must be a clean absolute path inside %s", c, folders)
	}
	under := func(root string) bool { return c == root || strings.HasPrefix(c, root+"/") }
	switch {
	case under(WorkspaceMount) && p.Workspace != "":
	case under(SkillMount) && s.Dir != "":
	default:
		return "", fmt.Errorf("--cwd: %q is not inside %s (where a command may start)", c, folders)
	}
	return c, nil
}

// CheckExecCwd checks a command's working directory cwd against the
// sandbox's folders under policy p (see Exec.Cwd).
func CheckExecCwd(s *Skill, p *Policy, cwd string) error {
	_, err := execCwd(s, p, &Exec{Cwd: cwd})
	return err
}

// CheckExec checks e before anything is built or started for it: a
// command to run, and a working directory inside the sandbox's folders,
// workspace being the granted workspace folder ("" when none). Resolve
// checks the same; a caller runs this first so that a bad --cwd is
// refused before the skill's dependency environment is built.
func CheckExec(s *Skill, workspace string, e Exec) error {
	if len(e.Args) == 0 {
		return errEmptyCommand
	}
	_, err := execCwd(s, &Policy{Workspace: workspace}, &e)
	return err
}

// errEmptyCommand refuses an exec without a command.
var errEmptyCommand = errors.New("command: empty: give the command to run")

// execRunsNode reports whether the exec'd command is Node.js (its memory
// fallback is RLIMIT_DATA: V8 reserves address space it never touches).
func execRunsNode(e *Exec) bool {
	if e == nil || len(e.Args) == 0 {
		return false
	}
	b := path.Base(e.Args[0])
	return b == "node" || b == "npx" || b == "npm"
}

// execPath is the PATH of an exec'd command: the dependency environment's
// interpreters and tools first.
func execPath(d *DepsEnv) string {
	var dirs []string
	for _, dir := range ExecPathDirs(d) {
		dirs = append(dirs, dir[0])
	}
	return strings.Join(append(dirs, "/bin"), ":")
}

// ExecPathDirs are the folders of an exec'd command's PATH that are host
// folders bound into the sandbox, in PATH's order, each as {the sandbox's
// path, the host's}: the dependency environment's, then the host's
// /usr/local/bin and /usr/bin (/usr is bound read-only). PATH ends with
// /bin, which is the sandbox's own.
func ExecPathDirs(d *DepsEnv) [][2]string {
	var dirs [][2]string
	if d != nil && d.Python != "" {
		dirs = append(dirs, [2]string{EnvMount + "/python/bin", d.Dir + "/python/bin"})
	}
	if d != nil && d.Node {
		dirs = append(dirs, [2]string{NodeModulesMount + "/.bin", d.Dir + "/node/node_modules/.bin"})
	}
	return append(dirs, [2]string{"/usr/local/bin", "/usr/local/bin"}, [2]string{"/usr/bin", "/usr/bin"})
}

// execEnv adjusts an exec'd command's environment: PATH with the
// dependency environment first and, in a skill's sandbox, PYTHONPATH with
// the skill's folder (so code run from the workspace imports the skill's
// library), unless the operator granted one.
func execEnv(env []string, d *DepsEnv, skillDir string, p *Policy) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			kv = "PATH=" + execPath(d)
		}
		out = append(out, kv)
	}
	if _, granted := p.Env["PYTHONPATH"]; skillDir != "" && !granted {
		out = append(out, "PYTHONPATH="+skillDir)
	}
	return out
}
