package spec

// The options of Generate and Resolve: the operator's grants and the
// host's facts a policy and a spec are made with.

import (
	"time"
)

// Option configures Generate and Resolve.
type Option func(*options)

type options struct {
	grants    Grants
	hostUID   uint32
	hostGID   uint32
	hostIDSet bool
	args      []string
	bundleDir string
	layout    *HostLayout
	arch      string
	hostname  string
	devDir    string
	fallback  bool
	nprocNS   bool
	prlimit   string
	deps      *DepsEnv
	command   []string
	cmdEnv    map[string]string
	exec      *Exec
}

// Grants are the operator's grants and overrides of one run: what the
// CLI's flags, the MCP server's configuration and the runner share, in
// one plain value. Zero values mean "the manifest's value, else the
// default". Resolve turns them, with the manifest, into a Policy.
type Grants struct {
	// Network is "none", "allow" (the hosts the manifest declares,
	// through the egress allowlist) or "host" (full host network).
	// Anything else makes Resolve fail closed.
	Network string
	// AllowHosts grants host:port rules explicitly (--allow-host), on
	// top of Network "allow" or, without it, instead of the manifest's
	// hosts (the operator may grant fewer hosts than the skill declares).
	AllowHosts []string
	// Resolve maps allowed names to addresses ("name:port:address", like
	// curl's --resolve): the only way a skill reaches a loopback or
	// private address.
	Resolve []string
	// Memory (bytes), CPUs (cores), Pids (tasks), Timeout (wall clock),
	// Scratch (bytes of the /tmp tmpfs and the file size limit) and
	// OutputLimit (bytes of stdout and of stderr) override the
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
}

// WithGrants applies the operator's grants g (fields set in g replace
// those set by earlier options; Env and the host lists add to them).
func WithGrants(g Grants) Option {
	return func(o *options) {
		o.grants.AllowHosts = append(o.grants.AllowHosts, g.AllowHosts...)
		o.grants.Resolve = append(o.grants.Resolve, g.Resolve...)
		if len(g.Env) > 0 && o.grants.Env == nil {
			o.grants.Env = map[string]string{}
		}
		for k, v := range g.Env {
			o.grants.Env[k] = v
		}
		if g.Network != "" {
			o.grants.Network = g.Network
		}
		if g.Memory != 0 {
			o.grants.Memory = g.Memory
		}
		if g.CPUs != 0 {
			o.grants.CPUs = g.CPUs
		}
		if g.Pids != 0 {
			o.grants.Pids = g.Pids
		}
		if g.Timeout != 0 {
			o.grants.Timeout = g.Timeout
		}
		if g.Scratch != 0 {
			o.grants.Scratch = g.Scratch
		}
		if g.OutputLimit != 0 {
			o.grants.OutputLimit = g.OutputLimit
		}
		if g.Workspace != "" {
			o.grants.Workspace = g.Workspace
		}
	}
}

// DepsEnv is a prepared dependency environment (package skillenv) that a
// Linux sandbox mounts read-only at EnvMount.
type DepsEnv struct {
	// Dir is the environment's host folder.
	Dir string
	// Python, when set, is the venv's base interpreter name
	// ("python3.11"): Dir/python is a venv whose bin/python3 runs a
	// Python entry point, with -s -E kept.
	Python string
	// Node says Dir/node/node_modules holds Node packages, mounted at
	// NodeModulesMount.
	Node bool
}

// WithDeps mounts the prepared environment env (Linux only).
func WithDeps(env *DepsEnv) Option { return func(o *options) { o.deps = env } }

// WithCommand replaces the entry point's command line with args and adds
// env to the environment: the runner's own programs (the dependency
// builder) in the skill's sandbox. env is not checked against the
// manifest's declared variables (the runner sets it, not the operator),
// but reserved variables are still refused.
func WithCommand(args []string, env map[string]string) Option {
	return func(o *options) { o.command, o.cmdEnv = args, env }
}

// WithHostID maps the sandbox's only user and group to these host IDs.
// Required for Linux specs; host ID 0 is refused.
func WithHostID(uid, gid uint32) Option {
	return func(o *options) { o.hostUID, o.hostGID, o.hostIDSet = uid, gid, true }
}

// WithArgs appends arguments to the entry point's command line (the
// runner passes Skill.Argv here).
func WithArgs(args ...string) Option {
	return func(o *options) { o.args = append(o.args, args...) }
}

// WithBundleDir makes the generated files' mount sources absolute paths
// in dir (the default is paths relative to the bundle, as the runtime
// spec allows). Darwin specs need it for the scratch folder.
func WithBundleDir(dir string) Option { return func(o *options) { o.bundleDir = dir } }

// WithHostLayout replaces the probed host layout (tests, other hosts).
func WithHostLayout(l HostLayout) Option { return func(o *options) { o.layout = &l } }

// WithArch sets the Go architecture the seccomp filter is built for
// (default: the running one).
func WithArch(goarch string) Option { return func(o *options) { o.arch = goarch } }

// WithRlimitFallback says the runtime will not apply cgroup limits (rootless
// without delegated cgroups): bound memory, tasks and CPU time with
// rlimits instead (see Fallback). nprocPerUserNS says the kernel counts
// RLIMIT_NPROC per user namespace (Linux 5.14 and later); without it the
// count would include every process of the host user, so the task limit is
// left unenforced rather than shared. Linux specs only.
func WithRlimitFallback(nprocPerUserNS bool) Option {
	return func(o *options) { o.fallback, o.nprocNS = true, nprocPerUserNS }
}

// WithRlimitWrapper makes the rlimit fallback apply its limits through
// util-linux prlimit(1) at path (a path inside the sandbox, e.g.
// /usr/bin/prlimit), which sets them and execs the entry point, instead of
// through process.rlimits. The runtime applies process.rlimits to its own
// container init while that still runs (libcontainer's init is Go, whose
// runtime cannot even start under a few hundred MiB of RLIMIT_AS, and
// grows its address space as it runs), so only the skill's own processes
// get the fallback limits this way.
func WithRlimitWrapper(path string) Option { return func(o *options) { o.prlimit = path } }

func collect(opts []Option) *options {
	o := &options{}
	for _, f := range opts {
		f(o)
	}
	return o
}
