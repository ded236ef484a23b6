package seatbelt

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Class says how an OCI field is honoured on macOS.
type Class string

// The three classes of an OCI field on macOS.
const (
	// Enforced fields mean on macOS what they mean on Linux (or something
	// stricter).
	Enforced Class = "enforced"
	// Degraded fields are applied partly or not at all, and the sandbox
	// still holds; the finding says what is lost.
	Degraded Class = "degraded"
	// Rejected fields cannot be honoured without changing what the
	// container is; create refuses them unless degradation is accepted.
	Rejected Class = "rejected"
)

// Rule is one row of the catalogue: how a field, or one case of it, is
// handled on macOS. docs/macos.md is generated from Fields.
type Rule struct {
	// ID names the rule; findings refer to it.
	ID string `json:"id"`
	// Field is the OCI JSON path the rule is about.
	Field string `json:"field"`
	// When is the case of the field the rule covers ("" for every case).
	When string `json:"when,omitempty"`
	// Class is how the case is honoured.
	Class Class `json:"class"`
	// Detail says what is enforced, what is lost, or why it is rejected.
	Detail string `json:"detail"`
}

// Finding is the classification of one field of one spec.
type Finding struct {
	// Field is the JSON path of the field in this spec, e.g. "mounts[2]".
	Field string `json:"field"`
	// Rule is the ID of the catalogue rule that applied.
	Rule string `json:"rule"`
	// Class is how the field is honoured.
	Class Class `json:"class"`
	// Detail says what is enforced, what is lost, or why it is rejected.
	Detail string `json:"detail"`
}

// String formats the finding as "field: class: detail".
func (f Finding) String() string { return f.Field + ": " + string(f.Class) + ": " + f.Detail }

// Report is the classification of every field a spec sets, in a stable
// order (the order of the spec's fields).
type Report struct {
	// Platform is always "darwin".
	Platform string `json:"platform"`
	// Findings lists one entry per field (or per element of a list).
	Findings []Finding `json:"findings"`
	// Counts holds how many findings each class has.
	Counts map[Class]int `json:"counts"`
}

// Of returns the findings of class c.
func (r Report) Of(c Class) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Class == c {
			out = append(out, f)
		}
	}
	return out
}

// Rule IDs. They are stable: JSON reports and docs refer to them.
const (
	ruleVersion            = "oci-version"
	ruleVersionOther       = "oci-version-other"
	ruleNoProcess          = "process-absent"
	ruleArgs               = "process-args"
	ruleEnv                = "process-env"
	ruleTmpdir             = "process-env-tmpdir"
	ruleCwd                = "process-cwd"
	ruleTerminal           = "process-terminal"
	ruleConsoleSize        = "process-console-size"
	ruleUserSame           = "process-user-caller"
	ruleUserOther          = "process-user-other"
	ruleUmask              = "process-umask"
	ruleAdditionalGids     = "process-additional-gids"
	ruleUsername           = "process-username"
	ruleCommandLine        = "process-command-line"
	ruleCapsNone           = "process-capabilities-none"
	ruleCaps               = "process-capabilities"
	ruleRlimit             = "process-rlimit"
	ruleRlimitNoMem        = "process-rlimit-memory"
	ruleRlimitNproc        = "process-rlimit-nproc"
	ruleRlimitLinux        = "process-rlimit-linux-only"
	ruleRlimitUnknown      = "process-rlimit-unknown"
	ruleNoNewPrivs         = "process-no-new-privileges"
	ruleApparmor           = "process-apparmor"
	ruleSelinux            = "process-selinux"
	ruleOOMScore           = "process-oom-score-adj"
	ruleScheduler          = "process-scheduler"
	ruleIOPriority         = "process-io-priority"
	ruleCPUAffinity        = "process-cpu-affinity"
	ruleRootAbsent         = "root-absent"
	ruleRootPath           = "root-path"
	ruleRootReadonly       = "root-readonly"
	ruleHostname           = "hostname"
	ruleDomainname         = "domainname"
	ruleMountBind          = "mount-bind"
	ruleMountBindMoved     = "mount-bind-moved"
	ruleMountTmpfs         = "mount-tmpfs"
	ruleMountPseudo        = "mount-pseudo"
	ruleMountOther         = "mount-other"
	ruleHooks              = "hooks"
	ruleAnnotations        = "annotations"
	ruleNetNS              = "namespace-network"
	ruleNoNetNS            = "namespace-network-absent"
	ruleNSPath             = "namespace-path"
	ruleNSPid              = "namespace-pid"
	ruleNSMount            = "namespace-mount"
	ruleNSIPC              = "namespace-ipc"
	ruleNSUTS              = "namespace-uts"
	ruleNSUser             = "namespace-user"
	ruleNSCgroup           = "namespace-cgroup"
	ruleNSTime             = "namespace-time"
	ruleNSUnknown          = "namespace-unknown"
	ruleIDMappings         = "id-mappings"
	ruleSysctl             = "sysctl"
	ruleResources          = "resources"
	ruleResourceDevices    = "resources-devices"
	ruleCgroupsPath        = "cgroups-path"
	ruleDeviceAllowed      = "device-allowed"
	ruleDeviceUnreachable  = "device-unreachable"
	ruleDeviceOther        = "device-other"
	ruleNetDevices         = "net-devices"
	ruleSeccomp            = "seccomp"
	ruleRootfsPropagation  = "rootfs-propagation"
	ruleMaskedPaths        = "masked-paths"
	ruleReadonlyPaths      = "readonly-paths"
	ruleMountLabel         = "mount-label"
	ruleIntelRdt           = "intel-rdt"
	ruleMemoryPolicy       = "memory-policy"
	rulePersonality        = "personality"
	ruleTimeOffsets        = "time-offsets"
	ruleOtherPlatform      = "other-platform"
	ruleSystemStartupPaths = "system-startup"
)

// Fields returns the catalogue of rules the classification uses, in
// documentation order. Every finding Explain or FromSpec reports names one
// of these rules.
func Fields() []Rule {
	return []Rule{
		{ruleSystemStartupPaths, "(base profile)", "", Enforced, "deny default; allowed: dyld and the shared cache, /usr/lib, /System/Library and the cryptexes (read, map executable), /dev/null and /dev/zero (read, write), /dev/random, /dev/urandom, /dev/fd, the time zone data, fork, signals and process information only within the same sandbox, the sysctl reads language runtimes make, and the libinfo mach service (user and group lookups)"},
		{ruleVersion, "ociVersion", "1.x", Enforced, "checked"},
		{ruleVersionOther, "ociVersion", "not 1.x", Rejected, "only runtime-spec 1.x configurations are understood"},
		{ruleNoProcess, "process", "absent", Rejected, "there is nothing to run"},
		{ruleArgs, "process.args", "", Enforced, "executed as given by sandbox-exec (PATH lookup uses process.env); an absolute args[0] outside the granted paths is made readable and executable as a single file; exec is allowed only within readable paths"},
		{ruleEnv, "process.env", "", Enforced, "exactly as given; the caller's environment is not inherited"},
		{ruleTmpdir, "process.env", "TMPDIR names a tmpfs mount's destination, or unset with a tmpfs on /tmp", Degraded, "TMPDIR is set to the tmpfs mount's scratch directory, since the destination itself cannot be mounted"},
		{ruleCwd, "process.cwd", "", Enforced, "the working directory is entered before the profile applies; it is not made readable by itself"},
		{ruleTerminal, "process.terminal", "true", Rejected, "no pseudo-terminal or console socket support on macOS yet"},
		{ruleConsoleSize, "process.consoleSize", "set", Degraded, "ignored without a terminal"},
		{ruleUserSame, "process.user.uid, process.user.gid", "equal to the caller's", Enforced, "the process runs as the user and group calling create"},
		{ruleUserOther, "process.user.uid, process.user.gid", "other than the caller's, or caller unknown", Degraded, "not switched: the process runs as the user and group calling create, confined by the profile"},
		{ruleUmask, "process.user.umask", "set", Enforced, "set with umask(2) before exec"},
		{ruleAdditionalGids, "process.user.additionalGids", "set", Degraded, "not set: the process keeps the caller's supplementary groups"},
		{ruleUsername, "process.user.username", "set", Degraded, "Windows only; ignored"},
		{ruleCommandLine, "process.commandLine", "set", Degraded, "Windows only; ignored"},
		{ruleCapsNone, "process.capabilities", "absent or every set empty", Enforced, "no capabilities are granted"},
		{ruleCaps, "process.capabilities", "some capability listed", Degraded, "Linux capabilities do not exist on macOS: none is granted; the process keeps the caller's privileges, confined by the profile"},
		{ruleRlimit, "process.rlimits", "RLIMIT_CORE, CPU, FSIZE, MEMLOCK, NOFILE, STACK", Enforced, "applied with setrlimit(2) before exec"},
		{ruleRlimitNoMem, "process.rlimits", "RLIMIT_AS, RLIMIT_DATA, RLIMIT_RSS", Degraded, "RLIMIT_AS and RLIMIT_DATA are set but macOS does not enforce them on mapped memory, RLIMIT_RSS (an alias of RLIMIT_AS on macOS) is not applied: there is no memory cap"},
		{ruleRlimitNproc, "process.rlimits", "RLIMIT_NPROC", Degraded, "applied, but macOS counts every process of the user, not of the container"},
		{ruleRlimitLinux, "process.rlimits", "RLIMIT_LOCKS, MSGQUEUE, NICE, RTPRIO, RTTIME, SIGPENDING", Degraded, "Linux only; not applied"},
		{ruleRlimitUnknown, "process.rlimits", "any other type", Rejected, "unknown resource limit type"},
		{ruleNoNewPrivs, "process.noNewPrivileges", "true", Degraded, "no such flag on macOS: the profile survives exec, but a set-user-ID binary within the readable paths still gains its owner's identity"},
		{ruleApparmor, "process.apparmorProfile", "set", Degraded, "AppArmor does not exist on macOS; not applied (the Seatbelt profile confines instead)"},
		{ruleSelinux, "process.selinuxLabel", "set", Degraded, "SELinux does not exist on macOS; not applied"},
		{ruleOOMScore, "process.oomScoreAdj", "set", Degraded, "ignored"},
		{ruleScheduler, "process.scheduler", "set", Degraded, "ignored"},
		{ruleIOPriority, "process.ioPriority", "set", Degraded, "ignored"},
		{ruleCPUAffinity, "process.execCPUAffinity", "set", Degraded, "ignored: macOS has no CPU affinity API"},
		{ruleRootAbsent, "root", "absent", Enforced, "no root directory is granted"},
		{ruleRootPath, "root.path", "", Degraded, "no chroot: the directory is granted at its host path (readable, and writable unless root.readonly); the process's / stays the host's file system, filtered by the profile"},
		{ruleRootReadonly, "root.readonly", "", Enforced, "true: only file-read* on root.path; false: file-write* too"},
		{ruleHostname, "hostname", "set", Degraded, "cannot be set: the process sees the host's name"},
		{ruleDomainname, "domainname", "set", Degraded, "cannot be set: the process sees the host's"},
		{ruleMountBind, "mounts[]", "bind, destination equal to source", Enforced, "source readable (file-read*, exec unless noexec), and writable (file-write*) unless ro"},
		{ruleMountBindMoved, "mounts[]", "bind, destination other than source", Degraded, "no mount namespace: the source is granted at its own host path, not at the destination"},
		{ruleMountTmpfs, "mounts[]", "tmpfs", Degraded, "backed by a per-container scratch directory, writable unless ro and removed with the container; it is granted at its host path, not at the destination; size and mode options are not enforced"},
		{ruleMountPseudo, "mounts[]", "proc, sysfs, devpts, mqueue, cgroup, or any mount on /dev, /proc or /sys", Degraded, "not mounted: macOS has no such file system; of /dev only null, zero, random, urandom and fd are reachable"},
		{ruleMountOther, "mounts[]", "any other type", Rejected, "the file system cannot be mounted for a sandboxed process"},
		{ruleHooks, "hooks.*", "non-empty", Rejected, "hooks are not run on macOS"},
		{ruleAnnotations, "annotations", "set", Enforced, "recorded in the state"},
		{ruleNetNS, "linux.namespaces[network]", "present, no path", Enforced, "no network: every network operation is denied"},
		{ruleNoNetNS, "linux.namespaces[network]", "absent", Degraded, "host network: outbound TCP and UDP to any address and DNS through mDNSResponder are allowed, listening and inbound connections are denied; SBPL filters remote hosts only as * or localhost, so a per-host allowlist cannot be expressed"},
		{ruleNSPath, "linux.namespaces[]", "with a path", Rejected, "joining an existing namespace is impossible on macOS"},
		{ruleNSPid, "linux.namespaces[pid]", "present", Degraded, "no PID namespace: host processes are visible by PID, but signals and process information are allowed only within the same sandbox"},
		{ruleNSMount, "linux.namespaces[mount]", "present", Degraded, "no private mount table: paths keep their host locations and the profile's file rules decide access"},
		{ruleNSIPC, "linux.namespaces[ipc]", "present", Enforced, "System V and POSIX IPC are denied entirely (stricter than a private namespace)"},
		{ruleNSUTS, "linux.namespaces[uts]", "present", Degraded, "the host's name is visible; it cannot be changed from the sandbox"},
		{ruleNSUser, "linux.namespaces[user]", "present", Degraded, "no user namespace: identities are not mapped"},
		{ruleNSCgroup, "linux.namespaces[cgroup]", "present", Degraded, "macOS has no cgroups"},
		{ruleNSTime, "linux.namespaces[time]", "present", Degraded, "clocks are the host's"},
		{ruleNSUnknown, "linux.namespaces[]", "unknown type", Rejected, "unknown namespace type"},
		{ruleIDMappings, "linux.uidMappings, linux.gidMappings", "set", Degraded, "not applied: there is no user namespace"},
		{ruleSysctl, "linux.sysctl", "set", Rejected, "kernel parameters cannot be set for one process tree on macOS"},
		{ruleResources, "linux.resources.*", "memory, cpu, pids, blockIO, hugepageLimits, network, rdma, unified", Degraded, "not enforced: macOS has no cgroups (see process.rlimits for what setrlimit can do)"},
		{ruleResourceDevices, "linux.resources.devices", "set", Enforced, "device access is denied by the profile except /dev/null, /dev/zero, /dev/random, /dev/urandom and /dev/fd"},
		{ruleCgroupsPath, "linux.cgroupsPath", "set", Degraded, "ignored: macOS has no cgroups"},
		{ruleDeviceAllowed, "linux.devices[]", "/dev/null, /dev/zero, /dev/random, /dev/urandom", Enforced, "the host's device is reachable"},
		{ruleDeviceUnreachable, "linux.devices[]", "/dev/full, /dev/tty", Degraded, "not reachable: the profile denies it"},
		{ruleDeviceOther, "linux.devices[]", "any other device", Rejected, "device nodes cannot be created for a sandboxed process"},
		{ruleNetDevices, "linux.netDevices", "set", Rejected, "network interfaces cannot be moved into a sandbox"},
		{ruleSeccomp, "linux.seccomp", "set", Degraded, "no system call filter: Seatbelt mediates operations, not system calls, so the kernel attack surface is not reduced"},
		{ruleRootfsPropagation, "linux.rootfsPropagation", "set", Degraded, "ignored: there are no mounts to propagate"},
		{ruleMaskedPaths, "linux.maskedPaths", "set", Enforced, "reading and writing are denied under each path, even inside granted paths"},
		{ruleReadonlyPaths, "linux.readonlyPaths", "set", Enforced, "writing is denied under each path, even inside writable paths"},
		{ruleMountLabel, "linux.mountLabel", "set", Degraded, "SELinux does not exist on macOS; not applied"},
		{ruleIntelRdt, "linux.intelRdt", "set", Degraded, "ignored"},
		{ruleMemoryPolicy, "linux.memoryPolicy", "set", Degraded, "ignored"},
		{rulePersonality, "linux.personality", "set", Rejected, "execution domains do not exist on macOS"},
		{ruleTimeOffsets, "linux.timeOffsets", "set", Degraded, "ignored: clocks are the host's"},
		{ruleOtherPlatform, "solaris, windows, vm, zos, freebsd", "set", Rejected, "configuration for another platform"},
	}
}

// classifier accumulates findings.
type classifier struct {
	rules    map[string]Rule
	findings []Finding
}

func newClassifier() *classifier {
	c := &classifier{rules: map[string]Rule{}}
	for _, r := range Fields() {
		c.rules[r.ID] = r
	}
	return c
}

// add records a finding for field under rule id; extra, when not empty,
// is appended to the rule's detail.
func (c *classifier) add(id, field, extra string) {
	r, ok := c.rules[id]
	if !ok {
		// A programming error caught by the tests: every ID is in Fields.
		panic("seatbelt: unknown rule " + id)
	}
	d := r.Detail
	if extra != "" {
		d += " (" + extra + ")"
	}
	c.findings = append(c.findings, Finding{Field: field, Rule: id, Class: r.Class, Detail: d})
}

func (c *classifier) report() Report {
	r := Report{Platform: "darwin", Findings: c.findings, Counts: map[Class]int{Enforced: 0, Degraded: 0, Rejected: 0}}
	for _, f := range c.findings {
		r.Counts[f.Class]++
	}
	return r
}

// Caller is the identity create runs as; the process runs as it.
type Caller struct {
	UID uint32
	GID uint32
}

// Explain classifies every field s sets without consulting the file
// system or the caller's identity (process.user is then reported as
// degraded unless FromSpec is given the caller).
func Explain(s *specs.Spec) Report {
	return classify(s, nil).report()
}
