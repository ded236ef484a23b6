package seatbelt

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

var update = flag.Bool("update", false, "rewrite testdata/*.sb and *.params (and docs/macos.md's table)")

func u32(v uint32) *uint32 { return &v }
func i64(v int64) *int64   { return &v }

// skillSpec is a hardened skill configuration as spec.Generate writes it
// for darwin: read-only root, the skill folder bound read-only at its own
// path, a tmpfs scratch on /tmp, the usual pseudo file systems, every
// namespace including network, no capabilities, noNewPrivileges, masked
// and read-only paths, seccomp and limits.
func skillSpec() *specs.Spec {
	skill := "/Users/alice/skills/pdf"
	return &specs.Spec{
		Version: "1.2.1",
		Process: &specs.Process{
			User: specs.User{UID: 501, GID: 20, Umask: u32(0o077)},
			Args: []string{"python3", "main.py"},
			Env: []string{
				"PATH=/usr/local/bin:/usr/bin:/bin",
				"LANG=C.UTF-8",
				"HOME=/tmp",
				"SKILL_DIR=" + skill,
			},
			Cwd:          skill,
			Capabilities: &specs.LinuxCapabilities{},
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024},
				{Type: "RLIMIT_CPU", Hard: 60, Soft: 60},
				{Type: "RLIMIT_AS", Hard: 1 << 30, Soft: 1 << 30},
				{Type: "RLIMIT_NPROC", Hard: 64, Soft: 64},
			},
			NoNewPrivileges: true,
		},
		Root:     &specs.Root{Path: "rootfs", Readonly: true},
		Hostname: "skill",
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts"},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "size=65536k"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/usr", Type: "bind", Source: "/usr", Options: []string{"rbind", "ro", "nosuid", "nodev"}},
			{Destination: "/bin", Type: "bind", Source: "/bin", Options: []string{"rbind", "ro", "nosuid", "nodev"}},
			{Destination: skill, Type: "bind", Source: skill, Options: []string{"rbind", "ro", "nosuid", "nodev"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "size=67108864"}},
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.NetworkNamespace}, {Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace}, {Type: specs.MountNamespace}, {Type: specs.UserNamespace},
				{Type: specs.CgroupNamespace},
			},
			UIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: 501, Size: 1}},
			GIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: 20, Size: 1}},
			Resources: &specs.LinuxResources{
				Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
				Memory:  &specs.LinuxMemory{Limit: i64(512 << 20)},
				Pids:    &specs.LinuxPids{Limit: i64(64)},
			},
			Seccomp:       &specs.LinuxSeccomp{DefaultAction: specs.ActErrno},
			MaskedPaths:   []string{"/proc/kcore", "/sys/firmware", skill + "/.env"},
			ReadonlyPaths: []string{"/proc/sys", "/proc/sysrq-trigger"},
		},
	}
}

// minimalSpec runs /bin/sh with a read-only root and nothing else.
func minimalSpec(netns bool) *specs.Spec {
	s := &specs.Spec{
		Version: "1.2.1",
		Process: &specs.Process{
			User: specs.User{UID: 501, GID: 20},
			Args: []string{"/bin/sh", "-c", "true"},
			Env:  []string{"PATH=/usr/bin:/bin"},
			Cwd:  "/",
		},
		Root:  &specs.Root{Path: "/Users/alice/bundle/rootfs", Readonly: true},
		Linux: &specs.Linux{},
	}
	if netns {
		s.Linux.Namespaces = []specs.LinuxNamespace{{Type: specs.NetworkNamespace}}
	}
	return s
}

func mountsSpec() *specs.Spec {
	s := minimalSpec(true)
	s.Root = &specs.Root{Path: "/Users/alice/bundle/rootfs", Readonly: false}
	s.Mounts = []specs.Mount{
		// read-only inside the writable root: stays read-only
		{Destination: "/Users/alice/bundle/rootfs/skill", Type: "bind", Source: "/Users/alice/bundle/rootfs/skill", Options: []string{"bind", "ro"}},
		// writable, and moved (degraded)
		{Destination: "/data", Source: "/Users/alice/data", Options: []string{"rbind", "rw"}},
		// read-only, not executable
		{Destination: "/Users/alice/skills", Type: "bind", Source: "/Users/alice/skills", Options: []string{"bind", "ro", "noexec"}},
		// read-only tmpfs
		{Destination: "/cache", Type: "tmpfs", Source: "tmpfs", Options: []string{"ro"}},
		// writable tmpfs
		{Destination: "/work", Type: "tmpfs", Source: "tmpfs"},
		// the same source twice, ro then rw: rw wins
		{Destination: "/var/folders/xy/T", Type: "bind", Source: "/var/folders/xy/T", Options: []string{"bind", "ro"}},
		{Destination: "/var/folders/xy/T", Type: "bind", Source: "/var/folders/xy/T", Options: []string{"bind", "ro", "rw"}},
	}
	s.Linux.ReadonlyPaths = []string{"/Users/alice/bundle/rootfs/etc"}
	return s
}

// oddPaths are path components that must never reach the profile text.
var oddPaths = []string{
	"with space",
	`quote"d`,
	`back\slash`,
	"paren(s)",
	"semi;colon",
	"new\nline",
	"données",
	"日本語",
	"emoji🙂",
	"#\"regex",
}

func oddSpec() *specs.Spec {
	s := minimalSpec(true)
	s.Root = &specs.Root{Path: "/Users/alice/odd/" + oddPaths[0] + "/rootfs", Readonly: true}
	for i, c := range oddPaths[1:] {
		src := "/Users/alice/odd/" + c
		opts := []string{"bind", "ro"}
		if i%2 == 0 {
			opts = []string{"bind", "rw"}
		}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: src, Source: src, Type: "bind", Options: opts})
	}
	s.Mounts = append(s.Mounts,
		// ".." and symbolic links are resolved before they become parameters
		specs.Mount{Destination: "/x", Source: "/Users/alice/odd/a/../b/./c/", Type: "bind", Options: []string{"bind"}},
		specs.Mount{Destination: "/y", Source: "/Users/alice/current/../pdf", Type: "bind", Options: []string{"bind", "ro"}},
		specs.Mount{Destination: "/z", Source: "/Users/alice/tmplink", Type: "bind", Options: []string{"bind", "ro"}},
	)
	s.Process.Cwd = "/Users/alice/odd/日本語"
	s.Linux.MaskedPaths = []string{"/Users/alice/odd/with space/rootfs/secret (1)"}
	return s
}

type goldenCase struct {
	name string
	spec *specs.Spec
	opts Options
}

func goldenOpts() Options {
	return Options{
		Bundle:     "/Users/alice/bundle",
		ScratchDir: "/var/run/skillrun/c1/scratch",
		FS:         macFS(),
		Caller:     &Caller{UID: 501, GID: 20},
	}
}

func goldenCases() []goldenCase {
	accept := goldenOpts()
	accept.AcceptDegradation = true
	return []goldenCase{
		{"skill-default", skillSpec(), goldenOpts()},
		{"mounts", mountsSpec(), goldenOpts()},
		{"network-off", minimalSpec(true), goldenOpts()},
		{"network-on", minimalSpec(false), goldenOpts()},
		{"odd-paths", oddSpec(), goldenOpts()},
	}
}

func formatParams(ps []Param) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Key + " " + strconv.Quote(p.Value) + "\n")
	}
	return b.String()
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			p, _, err := FromSpec(tc.spec, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			checkGenerated(t, p)
			sb := filepath.Join("testdata", tc.name+".sb")
			params := filepath.Join("testdata", tc.name+".params")
			if *update {
				if err := os.WriteFile(sb, []byte(p.Text), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(params, []byte(formatParams(p.Params)), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, f := range []struct{ file, got string }{{sb, p.Text}, {params, formatParams(p.Params)}} {
				want, err := os.ReadFile(f.file)
				if err != nil {
					t.Fatalf("%v (run go test ./seatbelt -update)", err)
				}
				if string(want) != f.got {
					t.Errorf("%s differs from the generated text (run go test ./seatbelt -update and review the diff):\n%s", f.file, f.got)
				}
			}
		})
	}
}

// staticStrings are the string literals a profile may contain besides
// parameter keys: those of the base and network sections.
func staticStrings(t *testing.T) map[string]bool {
	t.Helper()
	var w sbplWriter
	w.base()
	w.network()
	lits, err := stringLiterals(w.String())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for _, l := range lits {
		m[l] = true
	}
	return m
}

// checkGenerated runs on every generated profile: well-formed, and no
// string literal other than the static ones and parameter keys.
func checkGenerated(t *testing.T, p *Profile) {
	t.Helper()
	if err := CheckProfile(p.Text, p.Params); err != nil {
		t.Fatalf("CheckProfile: %v\n%s", err, p.Text)
	}
	lits, err := stringLiterals(p.Text)
	if err != nil {
		t.Fatal(err)
	}
	static := staticStrings(t)
	keys := map[string]bool{}
	for _, prm := range p.Params {
		keys[prm.Key] = true
	}
	for _, l := range lits {
		if !static[l] && !keys[l] {
			t.Errorf("profile has string literal %q that is neither static nor a parameter key", l)
		}
	}
	for _, prm := range p.Params {
		if static[prm.Value] {
			continue // e.g. a bind of /usr/lib: the same string, not spliced
		}
		if strings.Contains(p.Text, prm.Value) {
			t.Errorf("parameter %s=%q appears in the profile text", prm.Key, prm.Value)
		}
	}
}

func TestNoPathInProfile(t *testing.T) {
	p, _, err := FromSpec(oddSpec(), goldenOpts())
	if err != nil {
		t.Fatal(err)
	}
	checkGenerated(t, p)
	values := map[string]bool{}
	for _, prm := range p.Params {
		values[prm.Value] = true
	}
	for _, c := range oddPaths {
		if strings.Contains(p.Text, c) {
			t.Errorf("path component %q appears in the profile text", c)
		}
		found := false
		for v := range values {
			if strings.Contains(v, c) {
				found = true
			}
		}
		if !found {
			t.Errorf("path component %q is not passed as a parameter", c)
		}
	}
	if strings.Contains(p.Text, "/Users/") {
		t.Error("a spec path appears in the profile text")
	}
	// The command passes each parameter as one argument.
	argv := p.Command("/run/x/profile.sb")
	if argv[0] != SandboxExec || argv[1] != "-f" || argv[2] != "/run/x/profile.sb" {
		t.Errorf("command starts %q", argv[:3])
	}
	n := 0
	for i, a := range argv {
		if a == "-D" {
			n++
			if kv := argv[i+1]; !strings.Contains(kv, "=") {
				t.Errorf("-D %q has no =", kv)
			}
		}
		if a == "--" {
			if got := argv[i+1:]; strings.Join(got, " ") != strings.Join(p.Args, " ") {
				t.Errorf("command after -- is %q, want %q", got, p.Args)
			}
		}
	}
	if n != len(p.Params) {
		t.Errorf("%d -D arguments for %d parameters", n, len(p.Params))
	}
}

// FuzzNoPathInProfile checks that no bind source, whatever its bytes,
// changes the profile's structure or appears in its text.
func FuzzNoPathInProfile(f *testing.F) {
	for _, c := range oddPaths {
		f.Add(c)
	}
	f.Add(`") (allow default) ("`)
	f.Add(")))")
	f.Fuzz(func(t *testing.T, comp string) {
		if strings.ContainsAny(comp, "/\x00") || comp == "" || comp == "." || comp == ".." {
			t.Skip()
		}
		s := minimalSpec(true)
		src := "/Users/alice/fz/" + comp
		s.Mounts = []specs.Mount{{Destination: src, Source: src, Type: "bind", Options: []string{"bind"}}}
		p, _, err := FromSpec(s, goldenOpts())
		if err != nil {
			t.Fatal(err)
		}
		checkGenerated(t, p)
		if strings.Contains(p.Text, "/Users/alice/fz/") {
			t.Fatal("path spliced into the profile")
		}
	})
}

func TestGoldenContents(t *testing.T) {
	// Spot checks of semantics the golden files freeze, so a careless
	// -update cannot silently drop them.
	p, warns, err := FromSpec(skillSpec(), goldenOpts())
	if err != nil {
		t.Fatal(err)
	}
	if p.Network || strings.Contains(p.Text, "network-outbound") {
		t.Error("skill profile with a network namespace allows network")
	}
	param := func(v string) string {
		for _, prm := range p.Params {
			if prm.Value == v {
				return prm.Key
			}
		}
		return ""
	}
	if k := param("/Users/alice/skills/pdf"); !strings.HasPrefix(k, "READ_") {
		t.Errorf("skill folder parameter %q, want READ_", k)
	}
	if k := param("/Users/alice/bundle/rootfs"); !strings.HasPrefix(k, "READ_") {
		t.Errorf("read-only root parameter %q, want READ_", k)
	}
	scratch := "/private/var/run/skillrun/c1/scratch/tmpfs8"
	if k := param(scratch); !strings.HasPrefix(k, "WRITE_") {
		t.Errorf("tmpfs scratch parameter %q, want WRITE_", k)
	}
	if k := param("/Users/alice/skills/pdf/.env"); !strings.HasPrefix(k, "MASK_") {
		t.Errorf("masked path inside the skill: %q, want MASK_", k)
	}
	if param("/proc/kcore") != "" {
		t.Error("a masked path outside every grant became a parameter")
	}
	if want := []string{"/var/run/skillrun/c1/scratch/tmpfs8"}; strings.Join(p.ScratchDirs, ",") != want[0] {
		t.Errorf("ScratchDirs = %q, want %q (/dev and /dev/shm tmpfs are not backed)", p.ScratchDirs, want)
	}
	if got := p.Env[len(p.Env)-1]; got != "TMPDIR="+scratch {
		t.Errorf("TMPDIR = %q", got)
	}
	if len(p.Rlimits) != 4 || p.Umask == nil || *p.Umask != 0o077 {
		t.Errorf("rlimits %v umask %v", p.Rlimits, p.Umask)
	}
	if len(warns) == 0 {
		t.Error("no warnings for a spec with degraded fields")
	}

	on, _, err := FromSpec(minimalSpec(false), goldenOpts())
	if err != nil {
		t.Fatal(err)
	}
	if !on.Network || !strings.Contains(on.Text, `(remote ip "*:*")`) {
		t.Error("no network namespace: want outbound IP allowed")
	}
	if strings.Contains(on.Text, "network-inbound") || strings.Contains(on.Text, "network-bind") || strings.Contains(on.Text, "(allow network-outbound)") {
		t.Error("network rules broader than outbound IP")
	}
}

func TestFromSpecErrors(t *testing.T) {
	for name, mut := range map[string]func(*specs.Spec, *Options){
		"no args":           func(s *specs.Spec, _ *Options) { s.Process.Args = nil },
		"relative cwd":      func(s *specs.Spec, _ *Options) { s.Process.Cwd = "skill" },
		"relative root":     func(s *specs.Spec, o *Options) { s.Root.Path = "rootfs"; o.Bundle = "" },
		"tmpfs no scratch":  func(s *specs.Spec, o *Options) { o.ScratchDir = "" },
		"symlink loop":      func(s *specs.Spec, _ *Options) { s.Mounts[7].Source = "/Users/alice/loop/x" },
		"bind without src":  func(s *specs.Spec, _ *Options) { s.Mounts[7].Source = "" },
		"rejected field":    func(s *specs.Spec, _ *Options) { s.Linux.Sysctl = map[string]string{"net.ipv4.ip_forward": "1"} },
		"terminal":          func(s *specs.Spec, _ *Options) { s.Process.Terminal = true },
		"not 1.x":           func(s *specs.Spec, _ *Options) { s.Version = "2.0.0" },
		"joined network ns": func(s *specs.Spec, _ *Options) { s.Linux.Namespaces[1].Path = "/var/run/netns/x" },
	} {
		s, o := skillSpec(), goldenOpts()
		mut(s, &o)
		if _, _, err := FromSpec(s, o); err == nil {
			t.Errorf("%s: FromSpec succeeded", name)
		}
	}
	if _, _, err := FromSpec(nil, goldenOpts()); err == nil {
		t.Error("nil spec accepted")
	}
}

func TestAcceptDegradation(t *testing.T) {
	s := skillSpec()
	s.Hooks = &specs.Hooks{Prestart: []specs.Hook{{Path: "/bin/true"}}}
	s.Linux.Namespaces[1].Path = "/var/run/netns/x"
	_, _, err := FromSpec(s, goldenOpts())
	var rej *RejectedError
	if !errors.As(err, &rej) || !errors.Is(err, ErrRejected) {
		t.Fatalf("err = %v, want a *RejectedError", err)
	}
	if len(rej.Findings) != 2 || !strings.Contains(err.Error(), "hooks.prestart") || !strings.Contains(err.Error(), "linux.namespaces[1]") {
		t.Errorf("rejected findings %v", rej.Findings)
	}
	o := goldenOpts()
	o.AcceptDegradation = true
	p, warns, err := FromSpec(s, o)
	if err != nil {
		t.Fatal(err)
	}
	checkGenerated(t, p)
	if p.Network {
		t.Error("joining a network namespace by path must fall back to no network")
	}
	found := 0
	for _, w := range warns {
		if strings.HasPrefix(w.Message, "rejected: ") {
			found++
		}
	}
	if found != 2 {
		t.Errorf("%d rejected warnings, want 2: %v", found, warns)
	}
}
