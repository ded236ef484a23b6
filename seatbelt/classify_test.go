package seatbelt

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestClassification(t *testing.T) {
	type want struct {
		field, rule string
		class       Class
	}
	hook := []specs.Hook{{Path: "/usr/bin/true"}}
	cases := []struct {
		name   string
		mut    func(s *specs.Spec)
		caller *Caller
		want   []want
	}{
		{"version", func(s *specs.Spec) {}, nil, []want{{"ociVersion", ruleVersion, Enforced}}},
		{"version 2", func(s *specs.Spec) { s.Version = "2.0.0" }, nil, []want{{"ociVersion", ruleVersionOther, Rejected}}},
		{"no process", func(s *specs.Spec) { s.Process = nil }, nil, []want{{"process", ruleNoProcess, Rejected}}},
		{"args env cwd", func(s *specs.Spec) {}, nil, []want{
			{"process.args", ruleArgs, Enforced}, {"process.env", ruleEnv, Enforced}, {"process.cwd", ruleCwd, Enforced},
		}},
		{"tmpdir", func(s *specs.Spec) {
			s.Mounts = []specs.Mount{{Destination: "/scratch", Type: "tmpfs"}}
			s.Process.Env = append(s.Process.Env, "TMPDIR=/scratch/")
		}, nil, []want{{"process.env", ruleTmpdir, Degraded}, {"mounts[0]", ruleMountTmpfs, Degraded}}},
		{"terminal", func(s *specs.Spec) { s.Process.Terminal = true; s.Process.ConsoleSize = &specs.Box{} }, nil, []want{
			{"process.terminal", ruleTerminal, Rejected}, {"process.consoleSize", ruleConsoleSize, Degraded},
		}},
		{"user caller", func(s *specs.Spec) {}, &Caller{UID: 501, GID: 20}, []want{{"process.user", ruleUserSame, Enforced}}},
		{"user other", func(s *specs.Spec) { s.Process.User.UID = 0 }, &Caller{UID: 501, GID: 20}, []want{{"process.user", ruleUserOther, Degraded}}},
		{"user unknown caller", func(s *specs.Spec) {}, nil, []want{{"process.user", ruleUserOther, Degraded}}},
		{"user extras", func(s *specs.Spec) {
			s.Process.User.Umask = u32(0o22)
			s.Process.User.AdditionalGids = []uint32{12}
			s.Process.User.Username = "alice"
			s.Process.CommandLine = "x.exe"
		}, nil, []want{
			{"process.user.umask", ruleUmask, Enforced}, {"process.user.additionalGids", ruleAdditionalGids, Degraded},
			{"process.user.username", ruleUsername, Degraded}, {"process.commandLine", ruleCommandLine, Degraded},
		}},
		{"no caps", func(s *specs.Spec) { s.Process.Capabilities = &specs.LinuxCapabilities{} }, nil, []want{{"process.capabilities", ruleCapsNone, Enforced}}},
		{"caps", func(s *specs.Spec) {
			s.Process.Capabilities = &specs.LinuxCapabilities{Bounding: []string{"CAP_NET_RAW"}}
		}, nil, []want{{"process.capabilities", ruleCaps, Degraded}}},
		{"rlimits", func(s *specs.Spec) {
			for _, t := range []string{"RLIMIT_NOFILE", "RLIMIT_AS", "RLIMIT_RSS", "RLIMIT_NPROC", "RLIMIT_RTPRIO", "RLIMIT_BOGUS"} {
				s.Process.Rlimits = append(s.Process.Rlimits, specs.POSIXRlimit{Type: t, Soft: 1, Hard: 1})
			}
		}, nil, []want{
			{"process.rlimits[0]", ruleRlimit, Enforced}, {"process.rlimits[1]", ruleRlimitNoMem, Degraded},
			{"process.rlimits[2]", ruleRlimitNoMem, Degraded}, {"process.rlimits[3]", ruleRlimitNproc, Degraded},
			{"process.rlimits[4]", ruleRlimitLinux, Degraded}, {"process.rlimits[5]", ruleRlimitUnknown, Rejected},
		}},
		{"process lsm and scheduling", func(s *specs.Spec) {
			s.Process.NoNewPrivileges = true
			s.Process.ApparmorProfile = "docker-default"
			s.Process.SelinuxLabel = "system_u:system_r:container_t:s0"
			oom := 100
			s.Process.OOMScoreAdj = &oom
			s.Process.Scheduler = &specs.Scheduler{Policy: specs.SchedOther}
			s.Process.IOPriority = &specs.LinuxIOPriority{Class: specs.IOPRIO_CLASS_BE}
			s.Process.ExecCPUAffinity = &specs.CPUAffinity{Initial: "0"}
		}, nil, []want{
			{"process.noNewPrivileges", ruleNoNewPrivs, Degraded}, {"process.apparmorProfile", ruleApparmor, Degraded},
			{"process.selinuxLabel", ruleSelinux, Degraded}, {"process.oomScoreAdj", ruleOOMScore, Degraded},
			{"process.scheduler", ruleScheduler, Degraded}, {"process.ioPriority", ruleIOPriority, Degraded},
			{"process.execCPUAffinity", ruleCPUAffinity, Degraded},
		}},
		{"root", func(s *specs.Spec) {}, nil, []want{{"root.path", ruleRootPath, Degraded}, {"root.readonly", ruleRootReadonly, Enforced}}},
		{"no root", func(s *specs.Spec) { s.Root = nil }, nil, []want{{"root", ruleRootAbsent, Enforced}}},
		{"hostname", func(s *specs.Spec) { s.Hostname = "h"; s.Domainname = "d" }, nil, []want{
			{"hostname", ruleHostname, Degraded}, {"domainname", ruleDomainname, Degraded},
		}},
		{"mounts", func(s *specs.Spec) {
			s.Mounts = []specs.Mount{
				{Destination: "/a", Source: "/a/", Type: "bind", Options: []string{"ro"}},
				{Destination: "/b", Source: "/host/b", Options: []string{"rbind"}},
				{Destination: "/t", Type: "tmpfs", Source: "tmpfs"},
				{Destination: "/proc", Type: "proc"},
				{Destination: "/dev/mqueue", Type: "mqueue"},
				{Destination: "/dev/null", Source: "/dev/null", Type: "bind", Options: []string{"bind"}},
				{Destination: "/sys/fs/cgroup", Type: "cgroup"},
				{Destination: "/mnt", Type: "ext4", Source: "/dev/sda1"},
				{Destination: "/o", Type: "overlay", Source: "overlay"},
				{Destination: "/n", Source: "/n"},
			}
		}, nil, []want{
			{"mounts[0]", ruleMountBind, Enforced}, {"mounts[1]", ruleMountBindMoved, Degraded},
			{"mounts[2]", ruleMountTmpfs, Degraded}, {"mounts[3]", ruleMountPseudo, Degraded},
			{"mounts[4]", ruleMountPseudo, Degraded}, {"mounts[5]", ruleMountPseudo, Degraded},
			{"mounts[6]", ruleMountPseudo, Degraded}, {"mounts[7]", ruleMountOther, Rejected},
			{"mounts[8]", ruleMountOther, Rejected}, {"mounts[9]", ruleMountOther, Rejected},
		}},
		{"hooks", func(s *specs.Spec) {
			s.Hooks = &specs.Hooks{Prestart: hook, CreateRuntime: hook, CreateContainer: hook, StartContainer: hook, Poststart: hook, Poststop: hook}
		}, nil, []want{
			{"hooks.prestart", ruleHooks, Rejected}, {"hooks.createRuntime", ruleHooks, Rejected},
			{"hooks.createContainer", ruleHooks, Rejected}, {"hooks.startContainer", ruleHooks, Rejected},
			{"hooks.poststart", ruleHooks, Rejected}, {"hooks.poststop", ruleHooks, Rejected},
		}},
		{"annotations", func(s *specs.Spec) { s.Annotations = map[string]string{"a": "b"} }, nil, []want{{"annotations", ruleAnnotations, Enforced}}},
		{"namespaces", func(s *specs.Spec) {
			s.Linux.Namespaces = []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.NetworkNamespace}, {Type: specs.MountNamespace},
				{Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.UserNamespace},
				{Type: specs.CgroupNamespace}, {Type: specs.TimeNamespace}, {Type: "bogus"},
				{Type: specs.IPCNamespace, Path: "/proc/1/ns/ipc"},
			}
		}, nil, []want{
			{"linux.namespaces[0]", ruleNSPid, Degraded}, {"linux.namespaces[1]", ruleNetNS, Enforced},
			{"linux.namespaces[2]", ruleNSMount, Degraded}, {"linux.namespaces[3]", ruleNSIPC, Enforced},
			{"linux.namespaces[4]", ruleNSUTS, Degraded}, {"linux.namespaces[5]", ruleNSUser, Degraded},
			{"linux.namespaces[6]", ruleNSCgroup, Degraded}, {"linux.namespaces[7]", ruleNSTime, Degraded},
			{"linux.namespaces[8]", ruleNSUnknown, Rejected}, {"linux.namespaces[9]", ruleNSPath, Rejected},
		}},
		{"no netns", func(s *specs.Spec) { s.Linux.Namespaces = nil }, nil, []want{{"linux.namespaces", ruleNoNetNS, Degraded}}},
		{"no linux", func(s *specs.Spec) { s.Linux = nil }, nil, []want{{"linux.namespaces", ruleNoNetNS, Degraded}}},
		{"netns path", func(s *specs.Spec) {
			s.Linux.Namespaces = []specs.LinuxNamespace{{Type: specs.NetworkNamespace, Path: "/var/run/netns/n"}}
		}, nil, []want{{"linux.namespaces[0]", ruleNSPath, Rejected}}},
		{"id mappings sysctl", func(s *specs.Spec) {
			s.Linux.UIDMappings = []specs.LinuxIDMapping{{Size: 1}}
			s.Linux.GIDMappings = []specs.LinuxIDMapping{{Size: 1}}
			s.Linux.Sysctl = map[string]string{"kernel.shmmax": "1", "net.core.somaxconn": "1"}
		}, nil, []want{
			{"linux.uidMappings", ruleIDMappings, Degraded}, {"linux.gidMappings", ruleIDMappings, Degraded},
			{"linux.sysctl", ruleSysctl, Rejected},
		}},
		{"resources", func(s *specs.Spec) {
			w := uint16(10)
			s.Linux.Resources = &specs.LinuxResources{
				Devices:        []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
				Memory:         &specs.LinuxMemory{Limit: i64(1 << 20)},
				CPU:            &specs.LinuxCPU{Cpus: "0"},
				Pids:           &specs.LinuxPids{Limit: i64(10)},
				BlockIO:        &specs.LinuxBlockIO{Weight: &w},
				HugepageLimits: []specs.LinuxHugepageLimit{{Pagesize: "2MB"}},
				Network:        &specs.LinuxNetwork{},
				Rdma:           map[string]specs.LinuxRdma{"mlx": {}},
				Unified:        map[string]string{"memory.high": "1"},
			}
			s.Linux.CgroupsPath = "/skillrun/x"
		}, nil, []want{
			{"linux.resources.devices", ruleResourceDevices, Enforced}, {"linux.resources.memory", ruleResources, Degraded},
			{"linux.resources.cpu", ruleResources, Degraded}, {"linux.resources.pids", ruleResources, Degraded},
			{"linux.resources.blockIO", ruleResources, Degraded}, {"linux.resources.hugepageLimits", ruleResources, Degraded},
			{"linux.resources.network", ruleResources, Degraded}, {"linux.resources.rdma", ruleResources, Degraded},
			{"linux.resources.unified", ruleResources, Degraded}, {"linux.cgroupsPath", ruleCgroupsPath, Degraded},
		}},
		{"devices", func(s *specs.Spec) {
			s.Linux.Devices = []specs.LinuxDevice{{Path: "/dev/null"}, {Path: "/dev/full"}, {Path: "/dev/fuse"}, {Path: "/dev/urandom"}}
			s.Linux.NetDevices = map[string]specs.LinuxNetDevice{"eth1": {}}
		}, nil, []want{
			{"linux.devices[0]", ruleDeviceAllowed, Enforced}, {"linux.devices[1]", ruleDeviceUnreachable, Degraded},
			{"linux.devices[2]", ruleDeviceOther, Rejected}, {"linux.devices[3]", ruleDeviceAllowed, Enforced},
			{"linux.netDevices", ruleNetDevices, Rejected},
		}},
		{"linux security", func(s *specs.Spec) {
			s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActErrno}
			s.Linux.RootfsPropagation = "rslave"
			s.Linux.MaskedPaths = []string{"/proc/kcore"}
			s.Linux.ReadonlyPaths = []string{"/proc/sys"}
			s.Linux.MountLabel = "system_u:object_r:container_file_t:s0"
		}, nil, []want{
			{"linux.seccomp", ruleSeccomp, Degraded}, {"linux.rootfsPropagation", ruleRootfsPropagation, Degraded},
			{"linux.maskedPaths", ruleMaskedPaths, Enforced}, {"linux.readonlyPaths", ruleReadonlyPaths, Enforced},
			{"linux.mountLabel", ruleMountLabel, Degraded},
		}},
		{"linux misc", func(s *specs.Spec) {
			s.Linux.IntelRdt = &specs.LinuxIntelRdt{ClosID: "x"}
			s.Linux.MemoryPolicy = &specs.LinuxMemoryPolicy{Mode: "MPOL_BIND"}
			s.Linux.Personality = &specs.LinuxPersonality{Domain: specs.PerLinux32}
			s.Linux.TimeOffsets = map[string]specs.LinuxTimeOffset{"monotonic": {Secs: 1}}
		}, nil, []want{
			{"linux.intelRdt", ruleIntelRdt, Degraded}, {"linux.memoryPolicy", ruleMemoryPolicy, Degraded},
			{"linux.personality", rulePersonality, Rejected}, {"linux.timeOffsets", ruleTimeOffsets, Degraded},
		}},
		{"other platforms", func(s *specs.Spec) {
			s.Solaris = &specs.Solaris{}
			s.Windows = &specs.Windows{}
			s.VM = &specs.VM{}
			s.ZOS = &specs.ZOS{}
			s.FreeBSD = &specs.FreeBSD{}
		}, nil, []want{
			{"solaris", ruleOtherPlatform, Rejected}, {"windows", ruleOtherPlatform, Rejected}, {"vm", ruleOtherPlatform, Rejected},
			{"zos", ruleOtherPlatform, Rejected}, {"freebsd", ruleOtherPlatform, Rejected},
		}},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		s := minimalSpec(true)
		tc.mut(s)
		rep := classify(s, tc.caller).report()
		for _, f := range rep.Findings {
			seen[f.Rule] = true
		}
		for _, w := range tc.want {
			found := false
			for _, f := range rep.Findings {
				if f.Field == w.field && f.Rule == w.rule {
					found = true
					if f.Class != w.class {
						t.Errorf("%s: %s is %s, want %s", tc.name, w.field, f.Class, w.class)
					}
				}
			}
			if !found {
				t.Errorf("%s: no finding %s for %s; got %v", tc.name, w.rule, w.field, rep.Findings)
			}
		}
	}
	for _, r := range Fields() {
		if r.ID == ruleSystemStartupPaths {
			continue // documentation of the base profile, not a field
		}
		if !seen[r.ID] {
			t.Errorf("catalogue rule %s (%s, %s) is never produced by the cases above", r.ID, r.Field, r.When)
		}
	}
}

func TestCatalogue(t *testing.T) {
	ids := map[string]bool{}
	for _, r := range Fields() {
		if ids[r.ID] {
			t.Errorf("duplicate rule ID %s", r.ID)
		}
		ids[r.ID] = true
		if r.Field == "" || r.Detail == "" || (r.Class != Enforced && r.Class != Degraded && r.Class != Rejected) {
			t.Errorf("incomplete rule %+v", r)
		}
		if strings.Contains(r.Detail, "|") || strings.Contains(r.When, "|") || strings.Contains(r.Field, "|") {
			t.Errorf("rule %s contains | (breaks the markdown table)", r.ID)
		}
	}
}

func TestExplainJSON(t *testing.T) {
	rep := Explain(skillSpec())
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Platform string         `json:"platform"`
		Findings []Finding      `json:"findings"`
		Counts   map[string]int `json:"counts"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Platform != "darwin" || len(back.Findings) != len(rep.Findings) {
		t.Errorf("round trip: %s", b)
	}
	total := back.Counts["enforced"] + back.Counts["degraded"] + back.Counts["rejected"]
	if total != len(rep.Findings) || back.Counts["rejected"] != 0 {
		t.Errorf("counts %v for %d findings (the skill spec has no rejected field)", back.Counts, len(rep.Findings))
	}
	if len(rep.Of(Degraded)) != back.Counts["degraded"] {
		t.Error("Of(Degraded) disagrees with the counts")
	}
	if os.Getenv("SEATBELT_SHOW") != "" {
		out, _ := json.MarshalIndent(rep, "", "  ")
		t.Logf("%s", out)
	}
	if got := Explain(nil); len(got.Of(Rejected)) != 1 {
		t.Errorf("Explain(nil) = %v, want one rejected finding", got)
	}
}
