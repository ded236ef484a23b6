package seatbelt

// How each field of a spec is classified: its mounts, its process, its
// linux section.

import (
	"fmt"
	"path"
	"sort"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// mountKind is how a mount is translated.
type mountKind int

const (
	mountBind mountKind = iota
	mountTmpfs
	mountPseudo
	mountOther
)

func kindOf(m specs.Mount) mountKind {
	dst := path.Clean("/" + m.Destination)
	if dst == "/dev" || strings.HasPrefix(dst, "/dev/") || within(dst, "/proc") || within(dst, "/sys") {
		// Binds of host device nodes into /dev (a common way to pass
		// /dev/null and friends) are covered by the base profile.
		return mountPseudo
	}
	switch m.Type {
	case "proc", "sysfs", "devpts", "mqueue", "cgroup", "cgroup2", "devtmpfs", "securityfs", "debugfs", "tracefs", "binfmt_misc", "fusectl", "configfs", "pstore", "bpf", "hugetlbfs":
		return mountPseudo
	case "tmpfs":
		return mountTmpfs
	case "bind", "rbind":
		return mountBind
	case "", "none":
		if hasOption(m.Options, "bind") || hasOption(m.Options, "rbind") {
			return mountBind
		}
	}
	return mountOther
}

func hasOption(opts []string, o string) bool {
	for _, x := range opts {
		if x == o {
			return true
		}
	}
	return false
}

// readOnly reports whether the mount options make it read-only (the last
// of "ro" and "rw" wins, like mount(8)).
func readOnly(opts []string) bool {
	ro := false
	for _, o := range opts {
		switch o {
		case "ro":
			ro = true
		case "rw":
			ro = false
		}
	}
	return ro
}

// rlimitClass returns the rule that applies to an rlimit type and whether
// it is applied with setrlimit.
func rlimitClass(typ string) (rule string, apply bool) {
	switch typ {
	case "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_MEMLOCK", "RLIMIT_NOFILE", "RLIMIT_STACK":
		return ruleRlimit, true
	case "RLIMIT_AS", "RLIMIT_DATA":
		return ruleRlimitNoMem, true
	case "RLIMIT_RSS":
		return ruleRlimitNoMem, false
	case "RLIMIT_NPROC":
		return ruleRlimitNproc, true
	case "RLIMIT_LOCKS", "RLIMIT_MSGQUEUE", "RLIMIT_NICE", "RLIMIT_RTPRIO", "RLIMIT_RTTIME", "RLIMIT_SIGPENDING":
		return ruleRlimitLinux, false
	}
	return ruleRlimitUnknown, false
}

// reachableDevices are the device nodes the base profile allows.
func deviceRule(p string) string {
	switch path.Clean(p) {
	case "/dev/null", "/dev/zero", "/dev/random", "/dev/urandom":
		return ruleDeviceAllowed
	case "/dev/full", "/dev/tty":
		return ruleDeviceUnreachable
	}
	return ruleDeviceOther
}

// classify records a finding for every field s sets. caller, when not
// nil, is the identity the process will run as.
func classify(s *specs.Spec, caller *Caller) *classifier {
	c := newClassifier()
	if s == nil {
		c.add(ruleNoProcess, "process", "no configuration")
		return c
	}
	if strings.HasPrefix(s.Version, "1.") {
		c.add(ruleVersion, "ociVersion", "")
	} else {
		c.add(ruleVersionOther, "ociVersion", fmt.Sprintf("got %q", s.Version))
	}
	classifyProcess(c, s, caller)
	if s.Root == nil {
		c.add(ruleRootAbsent, "root", "")
	} else {
		c.add(ruleRootPath, "root.path", "")
		c.add(ruleRootReadonly, "root.readonly", "")
	}
	if s.Hostname != "" {
		c.add(ruleHostname, "hostname", "")
	}
	if s.Domainname != "" {
		c.add(ruleDomainname, "domainname", "")
	}
	for i, m := range s.Mounts {
		f := fmt.Sprintf("mounts[%d]", i)
		switch kindOf(m) {
		case mountBind:
			if path.Clean(m.Destination) == path.Clean(m.Source) {
				c.add(ruleMountBind, f, "destination "+m.Destination)
			} else {
				c.add(ruleMountBindMoved, f, fmt.Sprintf("source %s, destination %s", m.Source, m.Destination))
			}
		case mountTmpfs:
			c.add(ruleMountTmpfs, f, "destination "+m.Destination)
		case mountPseudo:
			c.add(ruleMountPseudo, f, fmt.Sprintf("type %q, destination %s", m.Type, m.Destination))
		default:
			c.add(ruleMountOther, f, fmt.Sprintf("type %q, destination %s", m.Type, m.Destination))
		}
	}
	if h := s.Hooks; h != nil {
		for _, l := range []struct {
			name  string
			hooks []specs.Hook
		}{
			{"prestart", h.Prestart}, {"createRuntime", h.CreateRuntime}, {"createContainer", h.CreateContainer},
			{"startContainer", h.StartContainer}, {"poststart", h.Poststart}, {"poststop", h.Poststop},
		} {
			if len(l.hooks) > 0 {
				c.add(ruleHooks, "hooks."+l.name, fmt.Sprintf("%d hook(s)", len(l.hooks)))
			}
		}
	}
	if len(s.Annotations) > 0 {
		c.add(ruleAnnotations, "annotations", "")
	}
	classifyLinux(c, s.Linux)
	for _, p := range []struct {
		name string
		set  bool
	}{
		{"solaris", s.Solaris != nil}, {"windows", s.Windows != nil}, {"vm", s.VM != nil},
		{"zos", s.ZOS != nil}, {"freebsd", s.FreeBSD != nil},
	} {
		if p.set {
			c.add(ruleOtherPlatform, p.name, "")
		}
	}
	return c
}

func classifyProcess(c *classifier, s *specs.Spec, caller *Caller) {
	p := s.Process
	if p == nil {
		c.add(ruleNoProcess, "process", "")
		return
	}
	c.add(ruleArgs, "process.args", "")
	c.add(ruleEnv, "process.env", "")
	if tmpdirRewrite(s) {
		c.add(ruleTmpdir, "process.env", "")
	}
	c.add(ruleCwd, "process.cwd", "")
	if p.Terminal {
		c.add(ruleTerminal, "process.terminal", "")
	}
	if p.ConsoleSize != nil {
		c.add(ruleConsoleSize, "process.consoleSize", "")
	}
	if caller != nil && caller.UID == p.User.UID && caller.GID == p.User.GID {
		c.add(ruleUserSame, "process.user", fmt.Sprintf("uid %d, gid %d", p.User.UID, p.User.GID))
	} else if caller != nil {
		c.add(ruleUserOther, "process.user", fmt.Sprintf("asked uid %d gid %d, runs as uid %d gid %d", p.User.UID, p.User.GID, caller.UID, caller.GID))
	} else {
		c.add(ruleUserOther, "process.user", fmt.Sprintf("asked uid %d gid %d; enforced only if that is the caller", p.User.UID, p.User.GID))
	}
	if p.User.Umask != nil {
		c.add(ruleUmask, "process.user.umask", "")
	}
	if len(p.User.AdditionalGids) > 0 {
		c.add(ruleAdditionalGids, "process.user.additionalGids", "")
	}
	if p.User.Username != "" {
		c.add(ruleUsername, "process.user.username", "")
	}
	if p.CommandLine != "" {
		c.add(ruleCommandLine, "process.commandLine", "")
	}
	if caps := p.Capabilities; caps != nil && len(caps.Bounding)+len(caps.Effective)+len(caps.Inheritable)+len(caps.Permitted)+len(caps.Ambient) > 0 {
		c.add(ruleCaps, "process.capabilities", "")
	} else {
		c.add(ruleCapsNone, "process.capabilities", "")
	}
	for i, r := range p.Rlimits {
		id, _ := rlimitClass(r.Type)
		c.add(id, fmt.Sprintf("process.rlimits[%d]", i), r.Type)
	}
	if p.NoNewPrivileges {
		c.add(ruleNoNewPrivs, "process.noNewPrivileges", "")
	}
	if p.ApparmorProfile != "" {
		c.add(ruleApparmor, "process.apparmorProfile", "")
	}
	if p.SelinuxLabel != "" {
		c.add(ruleSelinux, "process.selinuxLabel", "")
	}
	if p.OOMScoreAdj != nil {
		c.add(ruleOOMScore, "process.oomScoreAdj", "")
	}
	if p.Scheduler != nil {
		c.add(ruleScheduler, "process.scheduler", "")
	}
	if p.IOPriority != nil {
		c.add(ruleIOPriority, "process.ioPriority", "")
	}
	if p.ExecCPUAffinity != nil {
		c.add(ruleCPUAffinity, "process.execCPUAffinity", "")
	}
}

func classifyLinux(c *classifier, l *specs.Linux) {
	if l == nil {
		c.add(ruleNoNetNS, "linux.namespaces", "")
		return
	}
	netns := false
	for i, ns := range l.Namespaces {
		f := fmt.Sprintf("linux.namespaces[%d]", i)
		if ns.Path != "" {
			c.add(ruleNSPath, f, fmt.Sprintf("%s namespace at %s", ns.Type, ns.Path))
			if ns.Type == specs.NetworkNamespace {
				netns = true
			}
			continue
		}
		switch ns.Type {
		case specs.NetworkNamespace:
			netns = true
			c.add(ruleNetNS, f, "")
		case specs.PIDNamespace:
			c.add(ruleNSPid, f, "")
		case specs.MountNamespace:
			c.add(ruleNSMount, f, "")
		case specs.IPCNamespace:
			c.add(ruleNSIPC, f, "")
		case specs.UTSNamespace:
			c.add(ruleNSUTS, f, "")
		case specs.UserNamespace:
			c.add(ruleNSUser, f, "")
		case specs.CgroupNamespace:
			c.add(ruleNSCgroup, f, "")
		case specs.TimeNamespace:
			c.add(ruleNSTime, f, "")
		default:
			c.add(ruleNSUnknown, f, fmt.Sprintf("type %q", ns.Type))
		}
	}
	if !netns {
		c.add(ruleNoNetNS, "linux.namespaces", "")
	}
	if len(l.UIDMappings) > 0 {
		c.add(ruleIDMappings, "linux.uidMappings", "")
	}
	if len(l.GIDMappings) > 0 {
		c.add(ruleIDMappings, "linux.gidMappings", "")
	}
	if len(l.Sysctl) > 0 {
		keys := make([]string, 0, len(l.Sysctl))
		for k := range l.Sysctl {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		c.add(ruleSysctl, "linux.sysctl", strings.Join(keys, ", "))
	}
	if r := l.Resources; r != nil {
		if len(r.Devices) > 0 {
			c.add(ruleResourceDevices, "linux.resources.devices", "")
		}
		for _, x := range []struct {
			name string
			set  bool
		}{
			{"memory", r.Memory != nil}, {"cpu", r.CPU != nil}, {"pids", r.Pids != nil},
			{"blockIO", r.BlockIO != nil}, {"hugepageLimits", len(r.HugepageLimits) > 0},
			{"network", r.Network != nil}, {"rdma", len(r.Rdma) > 0}, {"unified", len(r.Unified) > 0},
		} {
			if x.set {
				c.add(ruleResources, "linux.resources."+x.name, "")
			}
		}
	}
	if l.CgroupsPath != "" {
		c.add(ruleCgroupsPath, "linux.cgroupsPath", "")
	}
	for i, d := range l.Devices {
		c.add(deviceRule(d.Path), fmt.Sprintf("linux.devices[%d]", i), d.Path)
	}
	if len(l.NetDevices) > 0 {
		c.add(ruleNetDevices, "linux.netDevices", "")
	}
	if l.Seccomp != nil {
		c.add(ruleSeccomp, "linux.seccomp", "")
	}
	if l.RootfsPropagation != "" {
		c.add(ruleRootfsPropagation, "linux.rootfsPropagation", "")
	}
	if len(l.MaskedPaths) > 0 {
		c.add(ruleMaskedPaths, "linux.maskedPaths", "")
	}
	if len(l.ReadonlyPaths) > 0 {
		c.add(ruleReadonlyPaths, "linux.readonlyPaths", "")
	}
	if l.MountLabel != "" {
		c.add(ruleMountLabel, "linux.mountLabel", "")
	}
	if l.IntelRdt != nil {
		c.add(ruleIntelRdt, "linux.intelRdt", "")
	}
	if l.MemoryPolicy != nil {
		c.add(ruleMemoryPolicy, "linux.memoryPolicy", "")
	}
	if l.Personality != nil {
		c.add(rulePersonality, "linux.personality", "")
	}
	if len(l.TimeOffsets) > 0 {
		c.add(ruleTimeOffsets, "linux.timeOffsets", "")
	}
}

// tmpdirRewrite reports whether the process' TMPDIR is pointed at a tmpfs
// mount's scratch directory (see Profile.Env).
func tmpdirRewrite(s *specs.Spec) bool {
	_, ok := tmpdirMount(s)
	return ok
}

// tmpdirMount returns the index of the tmpfs mount TMPDIR should name:
// the one TMPDIR already names, or, with TMPDIR unset, a tmpfs on /tmp.
func tmpdirMount(s *specs.Spec) (int, bool) {
	if s.Process == nil {
		return 0, false
	}
	tmpdir, set := "", false
	for _, e := range s.Process.Env {
		if v, ok := strings.CutPrefix(e, "TMPDIR="); ok {
			tmpdir, set = v, true
		}
	}
	want := "/tmp"
	if set {
		if !path.IsAbs(tmpdir) {
			return 0, false
		}
		want = path.Clean(tmpdir)
	}
	for i, m := range s.Mounts {
		if kindOf(m) == mountTmpfs && path.Clean("/"+m.Destination) == want {
			return i, true
		}
	}
	return 0, false
}
