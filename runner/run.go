package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/internal/safefs"
	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/spec"
)

// StderrTail is how many bytes of stderr the Result keeps (the end).
const StderrTail = 4096

// Options are the operator's grants and overrides for one run. Zero
// values mean "the manifest's value, else the default".
type Options struct {
	// Network is "none", "allow" (grant the manifest's hosts through the
	// egress allowlist) or "host" (full host network).
	Network string
	// AllowHosts grants host:port rules explicitly (with Network "allow"
	// on top of the manifest's, else instead of them).
	AllowHosts []string
	// Resolve maps allowed names to addresses ("name:port:address").
	Resolve []string
	// Memory, CPUs, Pids, Timeout, Scratch and OutputLimit override the
	// manifest's limits.
	Memory      int64
	CPUs        float64
	Pids        int64
	Timeout     time.Duration
	Scratch     int64
	OutputLimit int64
	// Env grants environment variables.
	Env map[string]string
	// Workspace is a host folder bound writable at /workspace.
	Workspace string
	// TempDir is where the private bundle folder is made (default
	// DefaultTempDir()). As root it must be traversable by the sandbox's
	// host user.
	TempDir string
	// Platform is the spec platform (default "linux").
	Platform string
	// ID is the container ID (default "skill-NAME-RANDOM").
	ID string
	// Warn receives warnings (grants beyond the manifest); nil discards.
	Warn func(string)
	// Deps provides the dependency environment of a skill that declares
	// packages (package skillenv); nil runs such a skill without one.
	Deps DepsProvider
	// Command, when set, runs instead of the skill's entry point, in the
	// skill's sandbox, with CommandEnv added to its environment: the
	// runner's own programs (the dependency builder). The input is not
	// checked against the skill's schema then.
	Command    []string
	CommandEnv map[string]string
}

// DepsProvider gives a run the skill's prepared dependency environment.
type DepsProvider interface {
	// Acquire returns the environment of sk, building it first when the
	// provider may; release is called once the run no longer needs it.
	Acquire(ctx context.Context, sk *spec.Skill) (env *spec.DepsEnv, info *EnvInfo, release func(), err error)
}

var (
	errTimeout     = errors.New("wall-clock timeout")
	errOutputLimit = errors.New("output limit exceeded")
)

// Run runs skill sk with input (a JSON object; empty means {}) through rt.
// A policy refusal is a Result with StoppedReason "policy", not an error;
// bad input is an *InputError; other errors are skillrun failures. The
// bundle folder and the container are always removed.
//
// Run is Prepare, a cold launch with the input on stdin from the start
// and the wall-clock limit counted from the launch, and the result.
func Run(ctx context.Context, rt runtime.Runtime, sk *spec.Skill, input []byte, opts Options) (*Result, error) {
	var argv []string
	if opts.Command == nil {
		obj, err := sk.ValidateInput(input)
		if err != nil {
			return nil, &InputError{Err: err}
		}
		if argv, err = sk.Argv(obj); err != nil {
			return nil, &InputError{Err: err}
		}
	}
	if len(bytes.TrimSpace(input)) == 0 {
		input = []byte("{}")
	}
	sb, refused, err := prepare(ctx, rt, sk, argv, opts, false)
	if err != nil || refused != nil {
		return refused, err
	}
	defer sb.Close()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sb.runCtx, sb.cancel = runCtx, cancel
	stop := sb.startTimeout()
	defer stop()
	sb.start, sb.ran = time.Now(), true
	sb.run(bytes.NewReader(input), nil)
	return sb.result(ctx, time.Since(sb.start), sb.status, sb.runErr)
}

// prepare does everything a run needs before its container starts:
// policy, dependency environment, bundle claim and files, egress server.
// A policy refusal is returned as a Result (nothing to run). warm wraps
// the entry point in the input holder (see Launch).
func prepare(ctx context.Context, rt runtime.Runtime, sk *spec.Skill, argv []string, opts Options, warm bool) (_ *Sandbox, _ *Result, retErr error) {
	platform := opts.Platform
	if platform == "" {
		platform = "linux"
	}
	ws := opts.Workspace
	if ws != "" {
		if abs, err := filepath.Abs(ws); err == nil {
			ws = abs
		}
	}
	uid, gid := HostID(sk.Dir, ws)
	sopts := specOptions(opts, uid, gid, argv)
	// Without cgroup limits (rootless, no delegation), rlimits bound
	// memory, tasks and CPU time instead.
	if cp, ok := rt.(runtime.CgroupProber); ok && platform == "linux" && !cp.CgroupLimits() {
		sopts = append(sopts, spec.WithRlimitFallback(nprocPerUserNS()))
		// /usr is the host's inside the sandbox: its prlimit(1) applies
		// the limits to the skill alone, not to the runtime's Go init.
		if fi, err := os.Stat(prlimitPath); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			sopts = append(sopts, spec.WithRlimitWrapper(prlimitPath))
		}
	}
	s := &Sandbox{rt: rt, sk: sk, warm: warm, done: make(chan struct{})}
	s.base = Result{Skill: sk.Name, ExitCode: -1}
	defer func() {
		if retErr != nil {
			s.cleanup()
		}
	}()
	if opts.Command == nil && opts.Deps != nil && !sk.Deps.Empty() && platform == "linux" {
		env, info, release, err := opts.Deps.Acquire(ctx, sk)
		if err != nil {
			return nil, nil, fmt.Errorf("skill %q: dependencies: %w", sk.Name, err)
		}
		// Held until the sandbox is destroyed (Close).
		s.releaseDeps = release
		s.base.Environment = info
		sopts = append(sopts, spec.WithDeps(env))
	}
	policy, err := spec.Resolve(sk, sopts...)
	if err != nil {
		var pe *spec.PolicyError
		if errors.As(err, &pe) {
			s.cleanup()
			res := s.base
			res.StoppedReason, res.Error = StoppedPolicy, pe.Error()
			return nil, &res, nil
		}
		return nil, nil, &InputError{Err: err}
	}
	s.policy = policy
	if policy.Workspace != "" {
		if err := checkWorkspace(policy.Workspace, uid, gid); err != nil {
			return nil, nil, &InputError{Err: err}
		}
	}
	for _, w := range policy.Warnings {
		s.base.Warnings = append(s.base.Warnings, w)
		if opts.Warn != nil {
			opts.Warn(w)
		}
	}
	if policy.Network == spec.NetworkAllowlist && platform != "linux" {
		s.cleanup()
		res := s.base
		res.StoppedReason, res.Error = StoppedPolicy, "network: per-host allowlists need Linux network namespaces"
		return nil, &res, nil
	}

	tmp := opts.TempDir
	if tmp == "" {
		tmp = DefaultTempDir()
	}
	collectStale(ctx, rt, tmp)
	s.id = opts.ID
	if s.id == "" {
		s.id = newID(sk.Name)
	}
	if s.claim, err = newBundleDir(tmp, sk.Name, s.id); err != nil {
		return nil, nil, err
	}
	s.dir = s.claim.dir
	if s.sp, err = writeBundle(s.dir, sk, platform, sopts, uid, gid, false); err != nil {
		return nil, nil, err
	}
	if warm {
		if platform != "linux" {
			return nil, nil, fmt.Errorf("skill %q: warm sandboxes need Linux", sk.Name)
		}
		p := *s.sp.Process // Prepare puts the input holder in front
		s.sp.Process = &p
	}
	if policy.Network == spec.NetworkAllowlist {
		if s.eg, err = startEgress(s.dir, policy); err != nil {
			return nil, nil, err
		}
		s.egressSock = s.eg.handoff.Path()
	}
	return s, nil, nil
}

// Bundle writes the bundle that runs sk with opts (and argv, the
// arguments derived from the input) into dir, which must be empty or
// missing, so that `skillrun run dir` runs the skill. As root, dir is
// handed to the host user the sandbox maps to. It returns the policy.
func Bundle(dir string, sk *spec.Skill, argv []string, opts Options) (*spec.Policy, error) {
	platform := opts.Platform
	if platform == "" {
		platform = "linux"
	}
	uid, gid := HostID(sk.Dir, opts.Workspace)
	sopts := specOptions(opts, uid, gid, argv)
	if opts.Deps != nil && !sk.Deps.Empty() && platform == "linux" {
		// The bundle names the environment's folder; it outlives this
		// call (Collect may remove it once unused, like any bundle's
		// host paths).
		env, _, release, err := opts.Deps.Acquire(context.Background(), sk)
		if err != nil {
			return nil, fmt.Errorf("skill %q: dependencies: %w", sk.Name, err)
		}
		release()
		sopts = append(sopts, spec.WithDeps(env))
	}
	policy, err := spec.Resolve(sk, sopts...)
	if err != nil {
		if errors.Is(err, spec.ErrPolicy) {
			return nil, err
		}
		return nil, &InputError{Err: err}
	}
	if policy.Workspace != "" {
		if err := checkWorkspace(policy.Workspace, uid, gid); err != nil {
			return nil, &InputError{Err: err}
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("bundle folder: %w", err)
	}
	if ents, err := os.ReadDir(dir); err != nil {
		return nil, fmt.Errorf("bundle folder: %w", err)
	} else if len(ents) > 0 {
		return nil, &InputError{Err: fmt.Errorf("bundle folder %q is not empty", dir)}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("bundle folder: %w", err)
	}
	if _, err := writeBundle(abs, sk, platform, sopts, uid, gid, true); err != nil {
		return nil, err
	}
	return policy, nil
}

// DefaultTempDir is where Run makes bundle folders when Options.TempDir
// is empty: $TMPDIR when set, else /dev/shm when it is a world-writable
// sticky tmpfs folder (a bundle is ~30 small files and folders, written
// and removed on every run: on a loaded disk file system that alone costs
// ~10 ms, on tmpfs ~1 ms), else /tmp.
func DefaultTempDir() string {
	if d := os.Getenv("TMPDIR"); d != "" {
		return d
	}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() && fi.Mode()&os.ModeSticky != 0 && fi.Mode().Perm()&0o003 == 0o003 {
		return "/dev/shm"
	}
	return "/tmp"
}

// specOptions turns the operator's options into spec options.
func specOptions(opts Options, uid, gid uint32, argv []string) []spec.Option {
	return []spec.Option{
		spec.WithNetwork(opts.Network), spec.WithMemory(opts.Memory), spec.WithCPUs(opts.CPUs),
		spec.WithPids(opts.Pids), spec.WithTimeout(opts.Timeout), spec.WithScratch(opts.Scratch),
		spec.WithOutputLimit(opts.OutputLimit), spec.WithEnv(opts.Env), spec.WithWorkspace(opts.Workspace),
		spec.WithHostID(uid, gid), spec.WithArgs(argv...),
		spec.WithAllowHosts(opts.AllowHosts...), spec.WithResolve(opts.Resolve...),
		spec.WithCommand(opts.Command, opts.CommandEnv),
	}
}

// writeBundle generates the spec and writes the bundle into the existing,
// empty folder dir (config.json only when config is set). As root it
// gives dir to uid/gid (the sandbox's root must reach rootfs; dir stays
// 0700) and copies a small skill, or one they cannot read, into the
// rootfs as theirs.
func writeBundle(dir string, sk *spec.Skill, platform string, sopts []spec.Option, uid, gid uint32, config bool) (*specs.Spec, error) {
	if platform == "linux" {
		root := os.Geteuid() == 0
		if root {
			if err := os.Chown(dir, int(uid), int(gid)); err != nil {
				return nil, fmt.Errorf("bundle folder: %w", err)
			}
		}
		// A small skill is copied into the bundle's rootfs at /skill, read-
		// only with the root and no mount of its own: a bind would name
		// the skill's host path (/home/alice/...) in the sandbox's
		// /proc/self/mountinfo, and the copy also pins the code for the
		// run. A large one is bound in place unless its files are
		// unreadable by the sandbox user (then copied anyway).
		small := treeWithin(sk.Dir, maxSkillCopyBytes, maxSkillCopyFiles)
		if small || (root && !readableBy(sk.Dir, uid, gid)) {
			owner := [2]int{-1, -1}
			if root {
				owner = [2]int{int(uid), int(gid)}
			}
			cp := spec.BundleSkillDir(dir)
			if err := copyTree(sk.Dir, cp, owner); err != nil {
				return nil, fmt.Errorf("copy skill %q: %w", sk.Name, err)
			}
			c := *sk
			c.Dir = cp
			sk = &c
		}
	}
	sopts = append(sopts[:len(sopts):len(sopts)], spec.WithBundleDir(dir))
	// The sandbox's /dev is the host's prepared device folder when it is
	// (or, as root, can be made) usable; else a tmpfs the runtime fills.
	if platform == "linux" && spec.EnsureDevDir(spec.HostDevDir) == nil {
		sopts = append(sopts, spec.WithDevDir(spec.HostDevDir))
	}
	sp, err := spec.Generate(sk, platform, sopts...)
	if err != nil {
		return nil, fmt.Errorf("generate spec for %q: %w", sk.Name, err)
	}
	// A generated spec that breaks the hardened profile is a bug: refuse
	// to run it rather than run it weaker.
	if err := spec.Validate(sp); err != nil {
		return nil, fmt.Errorf("generated spec for %q breaks the sandbox profile: %w", sk.Name, err)
	}
	write := spec.WriteBundleFiles
	if config {
		write = spec.WriteBundle
	}
	if err := write(dir, sp); err != nil {
		return nil, fmt.Errorf("skill %q: %w", sk.Name, err)
	}
	return sp, nil
}

// prlimitPath is util-linux's prlimit(1), the same path on the host and in
// the sandbox (which binds the host's /usr).
const prlimitPath = "/usr/bin/prlimit"

// looksLikeMemoryLimit recognises the errors interpreters and libc print
// when an allocation fails (ENOMEM from mmap or brk under RLIMIT_AS or
// RLIMIT_DATA).
func looksLikeMemoryLimit(stderr []byte) bool {
	s := string(stderr)
	for _, m := range []string{"MemoryError", "Cannot allocate memory", "cannot allocate memory", "out of memory", "Out of memory", "bad_alloc", "xmalloc"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// cpuTimeStop reports whether the init was killed by the RLIMIT_CPU
// backstop: SIGXCPU at the soft limit, or SIGKILL at the hard one with the
// CPU time to show for it.
func cpuTimeStop(p *spec.Policy, info *runtime.ExitInfo) bool {
	if p.Fallback == nil || info.Cgroups {
		return false
	}
	switch info.Signal {
	case syscall.SIGXCPU:
		return true
	case syscall.SIGKILL:
		return (info.UserCPU + info.SysCPU) >= time.Duration(p.Fallback.CPUTimeSeconds)*time.Second
	}
	return false
}

// enforcedBy is the mechanism the result reports for limit ("memory",
// "pids"), "" when none.
func enforcedBy(res *Result, limit string) string {
	if res.Limits == nil || res.Limits.Enforcement == nil {
		return ""
	}
	var e *Enforced
	switch limit {
	case "memory":
		e = &res.Limits.Enforcement.Memory
	case "pids":
		e = &res.Limits.Enforcement.Pids
	default:
		return ""
	}
	if e.EnforcedBy == spec.EnforcedByNone {
		return ""
	}
	return e.EnforcedBy
}

// looksLikePidsLimit recognises the errors interpreters print when fork or
// thread creation fails with EAGAIN, the pids controller's error.
func looksLikePidsLimit(stderr []byte) bool {
	s := string(stderr)
	for _, m := range []string{"Resource temporarily unavailable", "can't start new thread", "fork: retry", "EAGAIN"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

func fillUsage(res *Result, info *runtime.ExitInfo, wall time.Duration) {
	w := info.Wall
	if w == 0 {
		w = wall
	}
	res.Usage = Usage{
		WallMS:          w.Milliseconds(),
		CPUMS:           (info.UserCPU + info.SysCPU).Milliseconds(),
		PeakMemoryBytes: info.MaxRSS,
	}
}

func fillLimits(res *Result, p *spec.Policy, info *runtime.ExitInfo) {
	l := Limits{
		Cgroups:       info.Cgroups,
		TimeoutMS:     p.Timeout.Milliseconds(),
		OutputBytes:   p.Output,
		ScratchBytes:  p.Scratch,
		FileSizeBytes: p.Scratch,
		OpenFiles:     p.NoFile,
		Network:       p.Network,
		Workspace:     p.Workspace != "",
	}
	mem, cpus, pids := p.Memory, p.CPUs, p.Pids
	en := &Enforcement{
		Memory: Enforced{Limit: float64(mem), EnforcedBy: spec.EnforcedByNone},
		Pids:   Enforced{Limit: float64(pids), EnforcedBy: spec.EnforcedByNone},
		CPUs:   Enforced{Limit: cpus, EnforcedBy: spec.EnforcedByNone},
	}
	l.Enforcement = en
	switch f := p.Fallback; {
	case info.Cgroups:
		l.MemoryBytes, l.CPUs, l.Pids = &mem, &cpus, &pids
		for _, e := range []*Enforced{&en.Memory, &en.Pids, &en.CPUs} {
			e.EnforcedBy, e.Scope = spec.EnforcedByCgroup, ScopeSandbox
		}
	case f != nil:
		l.MemoryBytes = &mem
		en.Memory.EnforcedBy, en.Memory.Scope = f.Memory, ScopeProcess
		if f.Pids == spec.EnforcedByRlimitNproc {
			l.Pids = &pids
			en.Pids.EnforcedBy, en.Pids.Scope = f.Pids, ScopeSandbox
		} else {
			l.NotEnforced = append(l.NotEnforced, "pids")
		}
		l.NotEnforced = append(l.NotEnforced, "cpus")
		en.CPUTime = &Enforced{Limit: float64(f.CPUTimeSeconds), EnforcedBy: f.CPUTime, Scope: ScopeProcess}
		res.Warnings = append(res.Warnings, fmt.Sprintf(
			"no cgroups available to the runtime: memory bounded per process (%s), tasks by %s, cpu quota not enforced (%s backstop: %d s of CPU per process)",
			f.Memory, f.Pids, f.CPUTime, f.CPUTimeSeconds))
	default:
		l.NotEnforced = []string{"memory", "cpus", "pids"}
		res.Warnings = append(res.Warnings, "memory, cpu and pids limits were not enforced: no cgroups available to the runtime")
	}
	res.Limits = &l
}

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

// readableBy reports whether uid/gid can read every file and search every
// folder of the tree at dir (by permission bits; no ACLs). It stops at the
// first failure.
func readableBy(dir string, uid, gid uint32) bool {
	ok := true
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			ok = false
			return fs.SkipAll
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			ok = false
			return fs.SkipAll
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		need := os.FileMode(0o4)
		if d.IsDir() {
			need = 0o5
		}
		perm := fi.Mode().Perm()
		switch {
		case st != nil && st.Uid == uid:
			perm >>= 6
		case st != nil && st.Gid == gid:
			perm >>= 3
		}
		if perm&need != need {
			ok = false
			return fs.SkipAll
		}
		return nil
	})
	return ok
}

// Skills at most this big are copied into the bundle rather than bound.
const (
	maxSkillCopyBytes = 8 << 20
	maxSkillCopyFiles = 2000
)

// treeWithin reports whether dir holds at most maxBytes of regular files
// and maxFiles entries.
func treeWithin(dir string, maxBytes int64, maxFiles int) bool {
	var size int64
	n := 0
	ok := true
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			ok = false
			return fs.SkipAll
		}
		n++
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				size += fi.Size()
			}
		}
		if n > maxFiles || size > maxBytes {
			ok = false
			return fs.SkipAll
		}
		return nil
	})
	return ok
}

// copyTree copies regular files and folders of src to dst, keeping the
// execute bits, owned by owner (uid, gid; -1 keeps ours). Symlinks are
// skipped: a skill's links cannot point outside the skill in the sandbox
// anyway.
func copyTree(src, dst string, owner [2]int) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if err := safefs.CopyBeneath(src, rel, target, 0o644|fi.Mode().Perm()&0o111); err != nil {
				return err
			}
		default:
			return nil
		}
		if owner[0] < 0 {
			return nil
		}
		return os.Lchown(target, owner[0], owner[1])
	})
}

// newID returns "skill-NAME-RANDOM", a valid container ID.
func newID(name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "skill-" + name + "-" + hex.EncodeToString(b[:])
}

// capWriter keeps what is written up to limit bytes; the first write past
// the limit calls over (which cancels the run). Writes never fail, so the
// runtime's copier does not see EPIPE.
type capWriter struct {
	mu    sync.Mutex
	buf   []byte
	limit int64
	n     int64
	over  func()
	fired bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n += int64(len(p))
	if room := w.limit - int64(len(w.buf)); room > 0 {
		if int64(len(p)) > room {
			w.buf = append(w.buf, p[:room]...)
		} else {
			w.buf = append(w.buf, p...)
		}
	}
	if w.n > w.limit && !w.fired {
		w.fired = true
		w.over()
	}
	return len(p), nil
}

// Bytes returns what was kept.
func (w *capWriter) Bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf
}

// tail returns the last StderrTail bytes, cut at a rune boundary.
func tail(b []byte) string {
	if len(b) > StderrTail {
		b = b[len(b)-StderrTail:]
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
