package spec

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/skillrun/skillrun/egress/policy"
)

// Default limits, used when neither the manifest nor the operator sets one.
const (
	DefaultMemory  = 512 << 20
	DefaultCPUs    = 1.0
	DefaultPids    = 128
	DefaultTimeout = 30 * time.Second
	DefaultScratch = 64 << 20
	DefaultOutput  = 1 << 20
	DefaultNoFile  = 1024
	// MinMemory is the smallest memory limit accepted: below it the
	// interpreters do not start.
	MinMemory = 16 << 20
)

// Network modes.
const (
	// NetworkNone gives the skill a network namespace with only loopback.
	NetworkNone = "none"
	// NetworkHost shares the host's network: full, unfiltered access.
	NetworkHost = "host"
	// NetworkAllowlist keeps the empty network namespace and lets the
	// skill reach the granted hosts only, through skillrun's egress
	// server (package egress).
	NetworkAllowlist = "allowlist"
	// NetworkAllow is the operator's grant (--network allow) of the hosts
	// the manifest declares.
	NetworkAllow = "allow"
)

// Container paths of the sandbox layout.
const (
	SkillMount     = "/skill"
	WorkspaceMount = "/workspace"
	ScratchMount   = "/tmp"
)

// ErrPolicy is matched (errors.Is) by every policy refusal.
var ErrPolicy = errors.New("policy refusal")

// PolicyError is a refusal to run a skill with the grants it was given:
// the manifest asks for something the operator did not grant, or the
// operator asks for something skillrun cannot enforce.
type PolicyError struct {
	// Field is the manifest field or operator flag concerned.
	Field string
	// Reason is the human explanation.
	Reason string
}

// Error implements error.
func (e *PolicyError) Error() string { return e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrPolicy) true.
func (e *PolicyError) Is(target error) bool { return target == ErrPolicy }

// Policy is the effective sandbox policy of one run: the manifest's
// requests with the operator's overrides applied.
type Policy struct {
	// Network is NetworkNone, NetworkHost or NetworkAllowlist.
	Network string `json:"network"`
	// Hosts are the granted host:port rules (NetworkAllowlist).
	Hosts []string `json:"hosts,omitempty"`
	// Resolve maps granted "name:port" to "address" (the operator's
	// --resolve), for NetworkAllowlist.
	Resolve []string `json:"resolve,omitempty"`
	// Memory is the memory (and memory+swap) limit in bytes.
	Memory int64 `json:"memory_bytes"`
	// CPUs is the CPU quota in cores.
	CPUs float64 `json:"cpus"`
	// Pids is the maximum number of tasks.
	Pids int64 `json:"pids"`
	// Timeout is the wall-clock limit.
	Timeout time.Duration `json:"-"`
	// Scratch is the size of the /tmp tmpfs and the file size rlimit.
	Scratch int64 `json:"scratch_bytes"`
	// Output caps stdout and stderr (each), in bytes.
	Output int64 `json:"output_bytes"`
	// NoFile is RLIMIT_NOFILE.
	NoFile uint64 `json:"nofile"`
	// Env are the granted variables (besides the sandbox's own).
	Env map[string]string `json:"-"`
	// Workspace is the host folder bound writable at /workspace, or "".
	Workspace string `json:"workspace,omitempty"`
	// Writable are extra tmpfs paths from the manifest.
	Writable []string `json:"writable,omitempty"`
	// Cwd is an exec'd command's working directory (WithExec), "" for an
	// entry point (which starts in the scratch folder).
	Cwd string `json:"cwd,omitempty"`
	// Warnings are grants the operator made beyond the manifest.
	Warnings []string `json:"-"`
	// Fallback is set (WithRlimitFallback) when the runtime will not apply
	// cgroup limits: memory, tasks and CPU time are then bounded by the
	// rlimits it lists.
	Fallback *Fallback `json:"fallback,omitempty"`
}

// Mechanisms that enforce a limit, as reported in a run's result.
const (
	EnforcedByCgroup      = "cgroup"
	EnforcedByRlimitAS    = "rlimit_as"
	EnforcedByRlimitData  = "rlimit_data"
	EnforcedByRlimitNproc = "rlimit_nproc"
	EnforcedByRlimitCPU   = "rlimit_cpu"
	EnforcedByNone        = "none"
)

// Fallback is how a sandbox without cgroup limits is bounded, with
// per-process rlimits (Linux):
//
//   - memory: RLIMIT_AS and RLIMIT_DATA at the memory limit, per process
//     (only RLIMIT_DATA for Node.js, whose V8 reserves gigabytes of address
//     space it never uses: shared anonymous mappings then escape the bound);
//   - tasks: RLIMIT_NPROC at the pids limit when the kernel counts it per
//     user namespace (Linux 5.14 and later: every sandbox has its own user
//     namespace, so the count is the sandbox's tasks only); else none;
//   - CPU time: RLIMIT_CPU, a backstop of ceil(timeout x max(cpus, 1))+1
//     CPU seconds per process (SIGXCPU, then SIGKILL a second later) should
//     the runner's wall-clock timer never fire. The CPU quota (cpus, a rate)
//     has no rlimit equivalent and is not enforced.
type Fallback struct {
	// Memory, Pids and CPUTime name the mechanism (EnforcedBy*).
	Memory  string `json:"memory"`
	Pids    string `json:"pids"`
	CPUTime string `json:"cpu_time"`
	// CPUTimeSeconds is RLIMIT_CPU's soft limit.
	CPUTimeSeconds uint64 `json:"cpu_time_seconds"`
	// Wrapper, when set, is the prlimit(1) that applies these limits
	// before it execs the entry point (WithRlimitWrapper); otherwise they
	// are process.rlimits.
	Wrapper string `json:"wrapper,omitempty"`
}

// Resolve computes the effective policy of running s with opts: the
// manifest's requests, defaults for what it leaves out, and the operator's
// overrides. It returns a *PolicyError when the grants do not cover what
// the skill declares it needs, or the operator asks for something that
// cannot be enforced.
func Resolve(s *Skill, opts ...Option) (*Policy, error) {
	return resolve(s, collect(opts))
}

func resolve(s *Skill, o *options) (*Policy, error) {
	m := s.Manifest
	p := &Policy{
		Network: NetworkNone,
		Memory:  pick(o.grants.Memory, int64(m.Limits.Memory), DefaultMemory),
		CPUs:    pickF(o.grants.CPUs, m.Limits.CPUs, DefaultCPUs),
		Pids:    pick(o.grants.Pids, m.Limits.Pids, DefaultPids),
		Timeout: time.Duration(pick(int64(o.grants.Timeout), int64(m.Limits.Timeout), int64(DefaultTimeout))),
		Scratch: pick(o.grants.Scratch, int64(m.Limits.Scratch), DefaultScratch),
		Output:  pick(o.grants.OutputLimit, int64(m.Limits.Output), DefaultOutput),
		NoFile:  DefaultNoFile,
		Env:     map[string]string{},
	}
	var errs []error
	if p.Memory < MinMemory {
		errs = append(errs, fmt.Errorf("--memory: %d bytes is below the minimum %d", p.Memory, MinMemory))
	}
	if p.CPUs <= 0 || p.CPUs > 1024 {
		errs = append(errs, fmt.Errorf("--cpus: %g is out of range", p.CPUs))
	}
	if p.Pids < 2 {
		errs = append(errs, fmt.Errorf("--pids: %d is too small", p.Pids))
	}
	if p.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout: must be positive"))
	}
	if p.Scratch < 1<<20 {
		errs = append(errs, fmt.Errorf("scratch: %d bytes is below the minimum 1Mi", p.Scratch))
	}
	if p.Output <= 0 {
		errs = append(errs, fmt.Errorf("output limit: must be positive"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	if err := resolveNetwork(s, &m, o, p); err != nil {
		return nil, err
	}

	declared := map[string]bool{}
	for _, e := range m.Env {
		declared[e] = true
	}
	keys := make([]string, 0, len(o.grants.Env))
	for k := range o.grants.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !envNameRE().MatchString(k) {
			return nil, fmt.Errorf("--env: %q is not a valid variable name", k)
		}
		if reservedEnv[k] {
			return nil, fmt.Errorf("--env: %s is set by the sandbox and cannot be overridden", k)
		}
		if !declared[k] && s.Dir != "" { // a sandbox without a skill (Bare) declares nothing
			p.Warnings = append(p.Warnings, fmt.Sprintf("--env %s grants a variable %s does not declare", k, ManifestFile))
		}
		p.Env[k] = o.grants.Env[k]
	}

	switch ws := m.Filesystem.Workspace; {
	case o.grants.Workspace != "":
		abs, err := filepath.Abs(o.grants.Workspace)
		if err != nil {
			return nil, fmt.Errorf("--workspace: %w", err)
		}
		p.Workspace = filepath.Clean(abs)
		if (ws == "" || ws == WorkspaceNone) && s.Dir != "" && o.exec == nil {
			p.Warnings = append(p.Warnings, fmt.Sprintf("--workspace grants a writable folder to a skill whose %s does not ask for one", ManifestFile))
		}
	case ws == WorkspaceRequired:
		return nil, &PolicyError{Field: "filesystem.workspace", Reason: fmt.Sprintf(
			"skill %q needs a writable workspace (%s filesystem.workspace: required) and none was granted; grant one with --workspace DIR", s.Name, ManifestFile)}
	}
	for k, v := range o.cmdEnv {
		if reservedEnv[k] || !envNameRE().MatchString(k) {
			return nil, fmt.Errorf("command environment: %q cannot be set", k)
		}
		p.Env[k] = v
	}
	p.Writable = append([]string(nil), m.Filesystem.Writable...)
	if o.exec != nil {
		if len(o.exec.Args) == 0 {
			return nil, errEmptyCommand
		}
		cwd, err := execCwd(s, p, o.exec)
		if err != nil {
			return nil, err
		}
		p.Cwd = cwd
	}
	if o.fallback {
		f := &Fallback{Memory: EnforcedByRlimitAS, Pids: EnforcedByNone, CPUTime: EnforcedByRlimitCPU}
		if s.Entry.Kind == KindNode && o.exec == nil || execRunsNode(o.exec) {
			f.Memory = EnforcedByRlimitData
		}
		if o.nprocNS {
			f.Pids = EnforcedByRlimitNproc
		}
		f.CPUTimeSeconds = uint64(math.Ceil(p.Timeout.Seconds()*math.Max(p.CPUs, 1))) + 1
		f.Wrapper = o.prlimit
		p.Fallback = f
	}
	return p, nil
}

func pick(vals ...int64) int64 {
	for _, v := range vals {
		if v != 0 {
			return v
		}
	}
	return 0
}

func pickF(vals ...float64) float64 {
	for _, v := range vals {
		if v != 0 {
			return v
		}
	}
	return 0
}

// resolveNetwork sets the policy's network from the manifest's hosts and
// the operator's grants.
func resolveNetwork(s *Skill, m *Manifest, o *options, p *Policy) error {
	declared, err := policy.ParseRules(m.Network.Hosts)
	if err != nil {
		return fmt.Errorf("%s: network.hosts: %w", ManifestFile, err)
	}
	extra, err := policy.ParseRules(o.grants.AllowHosts)
	if err != nil {
		return fmt.Errorf("--allow-host: %w", err)
	}
	if len(o.grants.Resolve) > 0 && o.grants.Network == NetworkHost {
		return &PolicyError{Field: "--resolve", Reason: "needs the allowlist (--network allow or --allow-host), not --network=host"}
	}
	switch o.grants.Network {
	case NetworkHost:
		if len(extra) > 0 {
			return &PolicyError{Field: "--allow-host", Reason: "--network=host already grants the whole host network; use --allow-host without it"}
		}
		p.Network = NetworkHost
		if len(declared) == 0 && s.Dir != "" {
			p.Warnings = append(p.Warnings, "--network=host grants full host network to a skill that declares no network hosts")
		}
		return nil
	case "", NetworkNone, NetworkAllow:
	default:
		return &PolicyError{Field: "--network", Reason: fmt.Sprintf("%q is not one of none, allow, host", o.grants.Network)}
	}
	var granted []policy.Rule
	if o.grants.Network == NetworkAllow {
		granted = append(granted, declared...)
	}
	isDeclared := map[policy.Rule]bool{}
	for _, r := range declared {
		isDeclared[r] = true
	}
	have := map[policy.Rule]bool{}
	for _, r := range granted {
		have[r] = true
	}
	for _, r := range extra {
		if have[r] {
			continue
		}
		have[r] = true
		granted = append(granted, r)
		if !isDeclared[r] && s.Dir != "" {
			p.Warnings = append(p.Warnings, fmt.Sprintf("--allow-host %s grants a host %s does not declare", r, ManifestFile))
		}
	}
	if len(granted) == 0 {
		if len(declared) > 0 {
			hosts := make([]string, len(declared))
			for i, r := range declared {
				hosts[i] = r.String()
			}
			return &PolicyError{Field: "network", Reason: fmt.Sprintf(
				"skill %q needs network access to %s (%s network.hosts) and none was granted; grant those hosts with --network allow (or some of them with --allow-host HOST:PORT)",
				s.Name, strings.Join(hosts, ", "), ManifestFile)}
		}
		switch {
		case o.grants.Network != NetworkAllow:
		case s.Dir == "":
			p.Warnings = append(p.Warnings, "--network allow grants no host without --allow-host HOST:PORT")
		default:
			p.Warnings = append(p.Warnings, "--network allow: the skill declares no network hosts, so it gets none")
		}
		if len(o.grants.Resolve) > 0 {
			return &PolicyError{Field: "--resolve", Reason: "no host is granted (--network allow or --allow-host)"}
		}
		return nil
	}
	for _, r := range declared {
		if !have[r] {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s declares %s and it was not granted", ManifestFile, r))
		}
	}
	p.Network = NetworkAllowlist
	for _, r := range granted {
		p.Hosts = append(p.Hosts, r.String())
	}
	for _, m := range o.grants.Resolve {
		hp, addr, err := policy.ParseResolve(m)
		if err != nil {
			return fmt.Errorf("--resolve: %w", err)
		}
		r, _ := policy.ParseRule(hp)
		if !have[r] {
			ok := false
			for _, g := range granted {
				ok = ok || g.Match(strings.Split(hp, ":")[0], r.Port)
			}
			if !ok {
				return &PolicyError{Field: "--resolve", Reason: fmt.Sprintf("%s is not a granted host", hp)}
			}
		}
		p.Resolve = append(p.Resolve, hp+":"+addr.String())
	}
	return nil
}
