package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/spec"
)

// plan is what every way of running a skill decides first, once: the
// effective policy (manifest plus grants), the host user the sandbox maps
// to, the spec options, and the dependency environment. Run, Prepare (the
// warm pool) and Bundle all start from one; a sandbox (cold or warm)
// carries it out.
type plan struct {
	sk       *spec.Skill
	opts     Options
	platform string
	uid, gid uint32
	sopts    []spec.Option
	policy   *spec.Policy
	// envInfo describes the dependency environment acquired for the run;
	// releaseDeps gives it back (nil when none).
	envInfo     *EnvInfo
	releaseDeps func()
	// exec is the exec'd command as it runs (scripts resolved), with
	// note saying what was resolved; nil for an entry point.
	exec *spec.Exec
	note string
}

// newPlan plans running sk with argv (the arguments derived from the
// input) under opts. cgroups, when not nil, tells whether the back end
// will apply cgroup limits (rlimits replace them when it will not). A
// policy refusal is an error that errors.As finds a *spec.PolicyError in;
// the plan is returned with it (released), for the refusal to report the
// dependency environment the run had. Other problems with the skill or
// the grants are *InputErrors. The plan holds the dependency environment
// until release.
func newPlan(ctx context.Context, sk *spec.Skill, argv []string, opts Options, cgroups runtime.CgroupProber) (_ *plan, retErr error) {
	p := &plan{sk: sk, opts: opts, platform: opts.platform()}
	ws := opts.Workspace
	if ws != "" {
		if abs, err := filepath.Abs(ws); err == nil {
			ws = abs
		}
	}
	p.uid, p.gid = HostID(sk.Dir, ws)
	p.sopts = []spec.Option{
		spec.WithGrants(opts.Grants), spec.WithHostID(p.uid, p.gid), spec.WithArgs(argv...),
		spec.WithCommand(opts.Command, opts.CommandEnv),
	}
	if opts.Exec != nil {
		e := opts.Exec.Exec
		// A bad --cwd is refused before the dependency environment is
		// built (Resolve, after it, checks again).
		if err := spec.CheckExec(sk, ws, e); err != nil {
			return nil, &InputError{Err: err}
		}
		e.Args, p.note = resolveScript(sk, ws, e)
		p.exec = &e
	}
	// Without cgroup limits (rootless, no delegation), rlimits bound
	// memory, tasks and CPU time instead.
	if cgroups != nil && p.platform == "linux" && !cgroups.CgroupLimits() {
		p.sopts = append(p.sopts, spec.WithRlimitFallback(nprocPerUserNS()))
		// /usr is the host's inside the sandbox: its prlimit(1) applies
		// the limits to the skill alone, not to the runtime's Go init.
		if fi, err := os.Stat(prlimitPath); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			p.sopts = append(p.sopts, spec.WithRlimitWrapper(prlimitPath))
		}
	}
	defer func() {
		if retErr != nil {
			p.release()
		}
	}()
	var depsEnv *spec.DepsEnv
	if opts.Command == nil && opts.Deps != nil && !sk.Deps.Empty() && p.platform == "linux" {
		env, info, release, err := opts.Deps.Acquire(ctx, sk)
		if err != nil {
			return nil, &SkillError{sk.Name, fmt.Errorf("dependencies: %w", err)}
		}
		p.envInfo, p.releaseDeps = info, release
		p.sopts = append(p.sopts, spec.WithDeps(env))
		depsEnv = env
	}
	if p.exec != nil {
		// A program found on the sandbox's PATH runs without the shell
		// that reports one that is not (one process start less).
		p.exec.Direct = p.platform == "linux" && onExecPath(p.exec.Args[0], depsEnv)
		p.sopts = append(p.sopts, spec.WithExec(*p.exec))
	}
	policy, err := spec.Resolve(sk, p.sopts...)
	if err != nil {
		if pe := (*spec.PolicyError)(nil); errors.As(err, &pe) {
			return p, err
		}
		return nil, &InputError{Err: err}
	}
	p.policy = policy
	if policy.Workspace != "" {
		if err := checkWorkspace(policy.Workspace, p.uid, p.gid); err != nil {
			return nil, &InputError{Err: err}
		}
	}
	return p, nil
}

// release gives back the dependency environment.
func (p *plan) release() {
	if p.releaseDeps != nil {
		p.releaseDeps()
		p.releaseDeps = nil
	}
}

// prlimitPath is util-linux's prlimit(1), the same path on the host and in
// the sandbox (which binds the host's /usr).
const prlimitPath = "/usr/bin/prlimit"

// HostID picks the host user and group the sandbox's only user maps to:
// the caller's own IDs when not root. As root (never mapped to host root):
// the workspace folder's owner when it is not root, else the skill
// folder's owner when it is not root, else nobody (65534).
func HostID(skillDir, workspace string) (uint32, uint32) {
	if os.Geteuid() != 0 {
		return uint32(os.Geteuid()), uint32(os.Getegid())
	}
	const nobody = 65534
	for _, dir := range []string{workspace, skillDir} {
		if dir == "" {
			continue
		}
		if fi, err := os.Stat(dir); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
				gid := st.Gid
				if gid == 0 {
					gid = nobody
				}
				return st.Uid, gid
			}
		}
	}
	return nobody, nobody
}

// checkWorkspace makes sure the workspace is a folder the sandbox's host
// user can write: a bind mount does not change ownership, and a skill
// that cannot write its workspace fails late and obscurely.
func checkWorkspace(dir string, uid, gid uint32) error {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("--workspace: %q is not a folder", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == uid:
		perm >>= 6
	case st.Gid == gid:
		perm >>= 3
	}
	if perm&0o3 != 0o3 {
		return fmt.Errorf("--workspace: %q is not writable by host uid %d, the sandbox's user (chown it to that user, or, as root, use a folder owned by a non-root user)", dir, uid)
	}
	return nil
}
