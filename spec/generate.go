package spec

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/egress/policy"
)

// Annotations written on generated specs.
const (
	AnnotationSkill    = "run.skillrun.skill"
	AnnotationPlatform = "run.skillrun.platform"
	AnnotationNetwork  = "run.skillrun.network"
	AnnotationTimeout  = "run.skillrun.timeout_ms"
	AnnotationOutput   = "run.skillrun.output_bytes"
	// AnnotationSymlinks lists "name=target" symlinks WriteBundle creates
	// at the top of rootfs (e.g. "bin=usr/bin"), comma-separated.
	AnnotationSymlinks = "run.skillrun.rootfs.symlinks"
)

// AnnotationEtcCopy lists, comma-separated, the host /etc entries
// WriteBundle copies into ROOTFS/etc (symlinks as symlinks, a folder of
// symlinks entry by entry, small files by content). The sandbox's /etc is
// a plain folder of the read-only root, not a mount: every mount costs
// the runtime a few hundred microseconds of checked path walking at
// start.
const AnnotationEtcCopy = "run.skillrun.etc.copy"

// AnnotationEtcGenerate lists, comma-separated, the files WriteBundle
// generates in ROOTFS/etc (of generatedEtc).
const AnnotationEtcGenerate = "run.skillrun.etc.generate"

// generatedEtc are the files WriteBundle can generate in ROOTFS/etc, the
// sandbox's /etc.
var generatedEtc = []string{"passwd", "group", "hosts", "nsswitch.conf"}

// BundleSkillDir is where, inside a bundle, a skill copied for the run
// lives: in the rootfs at /skill, read-only with the root, so it needs no
// mount of its own.
func BundleSkillDir(bundle string) string {
	return filepath.Join(bundle, "rootfs", strings.TrimPrefix(SkillMount, "/"))
}

// HostLayout is what of the host a Linux sandbox sees, all read-only.
type HostLayout struct {
	// Dirs are host directories bound at the same path (/usr, /lib64).
	Dirs []string
	// Symlinks are top-level rootfs symlinks mirroring the host's merged
	// /usr layout (bin -> usr/bin).
	Symlinks map[string]string
	// Etc are host files under /etc that hold no secrets and that
	// programs need (/etc/ld.so.cache, /etc/localtime): copied into the
	// bundle's /etc.
	Etc []string
	// EtcDirs are host folders under /etc of the same kind
	// (/etc/alternatives, hundreds of symlinks): bound read-only inside
	// the bundle's /etc, cheaper than copying them on every run.
	EtcDirs []string
	// NetworkEtc are bound only when network is granted (host or
	// allowlist): /etc/ssl and the other CA folders; /etc/resolv.conf is
	// copied with the host's network only (the allowlist generates its own).
	NetworkEtc []string
}

// ProbeHostLayout looks at the host's top-level runtime directories:
// /usr, /bin, /sbin, /lib, /lib32, /lib64, /libx32. A directory is bound;
// a symlink into /usr becomes the same symlink in rootfs.
func ProbeHostLayout() HostLayout {
	l := HostLayout{Symlinks: map[string]string{}}
	for _, d := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(d)
			if err != nil {
				continue
			}
			if !path.IsAbs(t) {
				t = path.Clean(t)
			}
			if strings.HasPrefix(t, "usr/") || strings.HasPrefix(t, "/usr/") {
				l.Symlinks[d[1:]] = strings.TrimPrefix(t, "/")
				continue
			}
			if r, err := filepath.EvalSymlinks(d); err == nil {
				if fi, err := os.Stat(r); err == nil && fi.IsDir() {
					l.Dirs = append(l.Dirs, d)
				}
			}
		case fi.IsDir():
			l.Dirs = append(l.Dirs, d)
		}
	}
	for _, f := range []string{"/etc/alternatives", "/etc/ld.so.cache", "/etc/localtime"} {
		fi, err := os.Stat(f)
		switch {
		case err != nil:
		case fi.IsDir():
			l.EtcDirs = append(l.EtcDirs, f)
		default:
			l.Etc = append(l.Etc, f)
		}
	}
	for _, f := range []string{"/etc/resolv.conf", "/etc/ssl", "/etc/ca-certificates", "/etc/pki"} {
		if _, err := os.Stat(f); err == nil {
			l.NetworkEtc = append(l.NetworkEtc, f)
		}
	}
	return l
}

// Generate builds the hardened OCI spec that runs skill s on platform
// ("linux" or "darwin"). It returns a *PolicyError when the grants in opts
// do not cover what the skill declares it needs.
func Generate(s *Skill, platform string, opts ...Option) (*specs.Spec, error) {
	if s == nil {
		return nil, errors.New("generate: nil skill")
	}
	o := collect(opts)
	if o.command == nil && o.exec == nil && !s.HasEntry() {
		return nil, s.NoEntryError()
	}
	p, err := resolve(s, o)
	if err != nil {
		return nil, err
	}
	switch platform {
	case "linux":
		return generateLinux(s, p, o)
	case "darwin":
		return generateDarwin(s, p, o)
	}
	return nil, fmt.Errorf("generate: platform %q is not supported (want linux or darwin)", platform)
}

// processArgs is the entry point's command line with the skill at root.
func processArgs(s *Skill, root string, o *options) []string {
	if o.command != nil {
		return clone(o.command)
	}
	if o.exec != nil {
		if o.exec.Direct {
			return clone(o.exec.Args)
		}
		return append(clone(ExecShell), o.exec.Args...)
	}
	args := append([]string(nil), s.Entry.Interpreter...)
	if d := o.deps; d != nil && d.Python != "" && s.Entry.Kind == KindPython && len(args) > 0 {
		// The environment's venv runs on the same base interpreter.
		args[0] = EnvMount + "/python/bin/python3"
	}
	args = append(args, path.Join(root, s.Entry.Path))
	args = append(args, s.Manifest.Args...)
	return append(args, o.args...)
}

// processEnv is the allowlisted environment, sorted.
func processEnv(p *Policy, home, tmp, skillDir, workspace string) []string {
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"TMPDIR=" + tmp,
		"LANG=C.UTF-8",
	}
	if skillDir != "" {
		env = append(env, "SKILL_DIR="+skillDir)
	}
	if p.Workspace != "" {
		env = append(env, "WORKSPACE="+workspace)
	}
	if p.Network == NetworkAllowlist {
		env = append(env, proxyEnv...)
	}
	keys := make([]string, 0, len(p.Env))
	for k := range p.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "LANG" {
			env[3] = "LANG=" + p.Env[k]
			continue
		}
		env = append(env, k+"="+p.Env[k])
	}
	return env
}

// ProxyURL is the sandbox's HTTP proxy under a network allowlist.
const ProxyURL = "http://127.0.0.1:3128"

// proxyEnv points clients that honour proxy variables at the sandbox's
// proxy (clients that do not still go through the allowlist, by DNS).
var proxyEnv = []string{
	"HTTP_PROXY=" + ProxyURL, "HTTPS_PROXY=" + ProxyURL, "http_proxy=" + ProxyURL, "https_proxy=" + ProxyURL,
	"NO_PROXY=localhost,127.0.0.1", "no_proxy=localhost,127.0.0.1",
}

func annotations(s *Skill, p *Policy, platform string) map[string]string {
	a := map[string]string{
		AnnotationSkill:    s.Name,
		AnnotationPlatform: platform,
		AnnotationNetwork:  p.Network,
		AnnotationTimeout:  strconv.FormatInt(p.Timeout.Milliseconds(), 10),
		AnnotationOutput:   strconv.FormatInt(p.Output, 10),
	}
	if p.Network == NetworkAllowlist {
		a[policy.AnnotationAllow] = strings.Join(p.Hosts, ",")
		if len(p.Resolve) > 0 {
			a[policy.AnnotationResolve] = strings.Join(p.Resolve, ",")
		}
	}
	return a
}

func rlimits(p *Policy) []specs.POSIXRlimit {
	return []specs.POSIXRlimit{
		{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
		{Type: "RLIMIT_FSIZE", Hard: uint64(p.Scratch), Soft: uint64(p.Scratch)},
		{Type: "RLIMIT_NOFILE", Hard: p.NoFile, Soft: p.NoFile},
	}
}

// fallbackRlimits are the rlimits that stand in for cgroup limits
// (Policy.Fallback), when no wrapper applies them.
func fallbackRlimits(p *Policy) []specs.POSIXRlimit {
	f := p.Fallback
	if f == nil || f.Wrapper != "" {
		return nil
	}
	var r []specs.POSIXRlimit
	for _, l := range fallbackLimits(p) {
		r = append(r, specs.POSIXRlimit{Type: l.rlimit, Soft: l.soft, Hard: l.hard})
	}
	return r
}

// withRlimitWrapper prefixes args with the prlimit(1) command line that
// applies the fallback rlimits and execs args (Fallback.Wrapper).
func withRlimitWrapper(p *Policy, args []string) []string {
	f := p.Fallback
	if f == nil || f.Wrapper == "" {
		return args
	}
	w := []string{f.Wrapper}
	for _, r := range fallbackLimits(p) {
		w = append(w, fmt.Sprintf("--%s=%d:%d", r.name, r.soft, r.hard))
	}
	return append(append(w, "--"), args...)
}

type fallbackLimit struct {
	name       string // prlimit(1)'s option
	rlimit     string // OCI name
	soft, hard uint64
}

// fallbackLimits lists the rlimits of Policy.Fallback.
func fallbackLimits(p *Policy) []fallbackLimit {
	f := p.Fallback
	mem := uint64(p.Memory)
	r := []fallbackLimit{{"data", "RLIMIT_DATA", mem, mem}}
	if f.Memory == EnforcedByRlimitAS {
		r = append(r, fallbackLimit{"as", "RLIMIT_AS", mem, mem})
	}
	if f.Pids == EnforcedByRlimitNproc {
		r = append(r, fallbackLimit{"nproc", "RLIMIT_NPROC", uint64(p.Pids), uint64(p.Pids)})
	}
	return append(r, fallbackLimit{"cpu", "RLIMIT_CPU", f.CPUTimeSeconds, f.CPUTimeSeconds + 1})
}

var (
	roBind   = []string{"rbind", "ro", "nosuid", "nodev"}
	roFile   = []string{"bind", "ro", "nosuid", "nodev", "noexec"}
	rwBind   = []string{"rbind", "rw", "nosuid", "nodev", "noexec"}
	tmpfsOpt = func(size int64, mode string) []string {
		return []string{"nosuid", "nodev", "noexec", "mode=" + mode, "size=" + strconv.FormatInt(size, 10)}
	}
)

// clone copies a package-level slice so that no spec shares (and a caller
// cannot modify) the package's tables.
func clone(s []string) []string { return append([]string(nil), s...) }

// maskedPaths and readonlyPaths are runc's defaults (runc spec), plus
// the host's boot id: /proc/sys/kernel/random/boot_id is not namespaced
// and identifies the host (tests/security: secrets/machine-id).
var (
	maskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/sched_debug", "/proc/scsi", "/proc/timer_list", "/proc/timer_stats",
		"/proc/sys/kernel/random/boot_id",
	}
	readonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

func generateLinux(s *Skill, p *Policy, o *options) (*specs.Spec, error) {
	if !o.hostIDSet {
		return nil, errors.New("generate: linux: the host user is not set (WithHostID)")
	}
	if o.hostUID == 0 || o.hostGID == 0 {
		return nil, errors.New("generate: linux: refusing to map the sandbox user to host uid or gid 0")
	}
	layout := o.layout
	if layout == nil {
		l := ProbeHostLayout()
		layout = &l
	}
	arch := o.arch
	if arch == "" {
		arch = goruntime.GOARCH
	}
	dev := specs.Mount{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}}
	if o.devDir != "" {
		// The host's prepared device folder (runtime/linux/devdir), read-only: the
		// runtime then makes no device nodes or links of its own.
		dev = specs.Mount{Destination: "/dev", Type: "bind", Source: o.devDir, Options: []string{"bind", "ro", "nosuid", "noexec"}}
	}
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		dev,
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: tmpfsOpt(8<<20, "1777")},
	}
	for _, d := range layout.Dirs {
		mounts = append(mounts, specs.Mount{Destination: d, Type: "bind", Source: d, Options: clone(roBind)})
	}
	etcCopy := append([]string(nil), layout.Etc...)
	for _, d := range layout.EtcDirs {
		mounts = append(mounts, specs.Mount{Destination: d, Type: "bind", Source: d, Options: clone(roBind)})
	}
	if p.Network == NetworkHost || p.Network == NetworkAllowlist {
		// The CA certificates (/etc/ssl, /etc/ca-certificates, /etc/pki)
		// for any networked skill: HTTPS clients verify the hosts they
		// reach. The host's resolv.conf only with the host's network; the
		// allowlist's is generated (its own DNS).
		for _, f := range layout.NetworkEtc {
			if f == "/etc/resolv.conf" {
				if p.Network == NetworkHost {
					etcCopy = append(etcCopy, f) // a file: copied
				}
				continue
			}
			mounts = append(mounts, specs.Mount{Destination: f, Type: "bind", Source: f, Options: clone(roBind)})
		}
	}
	// A skill copied into the bundle's rootfs is part of the read-only
	// root; one elsewhere is bound there.
	skillDir := SkillMount
	switch {
	case s.Dir == "":
		skillDir = "" // a sandbox without a skill (Bare)
	case o.bundleDir == "" || filepath.Clean(s.Dir) != BundleSkillDir(o.bundleDir):
		mounts = append(mounts, specs.Mount{Destination: SkillMount, Type: "bind", Source: s.Dir, Options: clone(roBind)})
	}
	mounts = append(mounts, specs.Mount{Destination: ScratchMount, Type: "tmpfs", Source: "tmpfs", Options: tmpfsOpt(p.Scratch, "1777")})
	for _, w := range p.Writable {
		mounts = append(mounts, specs.Mount{Destination: w, Type: "tmpfs", Source: "tmpfs", Options: tmpfsOpt(p.Scratch, "1777")})
	}
	if p.Workspace != "" {
		mounts = append(mounts, specs.Mount{Destination: WorkspaceMount, Type: "bind", Source: p.Workspace, Options: clone(rwBind)})
	}
	env := processEnv(p, ScratchMount, ScratchMount, skillDir, WorkspaceMount)
	if d := o.deps; d != nil {
		mounts = append(mounts, specs.Mount{Destination: EnvMount, Type: "bind", Source: d.Dir, Options: clone(roBind)})
		if d.Node {
			mounts = append(mounts, specs.Mount{Destination: NodeModulesMount, Type: "bind", Source: filepath.Join(d.Dir, "node", "node_modules"), Options: clone(roBind)})
			env = append(env, "NODE_PATH="+NodeModulesMount)
		}
	}
	cwd := ScratchMount
	if o.exec != nil {
		cwd = p.Cwd
		env = execEnv(env, o.deps, skillDir, p)
	}

	namespaces := []specs.LinuxNamespace{
		{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
		{Type: specs.MountNamespace}, {Type: specs.UserNamespace}, {Type: specs.CgroupNamespace},
	}
	if p.Network != NetworkHost {
		namespaces = append(namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	}
	quota := int64(p.CPUs * 100000)
	period := uint64(100000)
	swap := p.Memory
	symlinks := make([]string, 0, len(layout.Symlinks))
	for k, v := range layout.Symlinks {
		symlinks = append(symlinks, k+"="+v)
	}
	sort.Strings(symlinks)
	ann := annotations(s, p, "linux")
	if len(symlinks) > 0 {
		ann[AnnotationSymlinks] = strings.Join(symlinks, ",")
	}
	if len(etcCopy) > 0 {
		ann[AnnotationEtcCopy] = strings.Join(etcCopy, ",")
	}
	gen := generatedEtc
	if p.Network == NetworkAllowlist {
		gen = append(clone(gen), "resolv.conf")
	}
	ann[AnnotationEtcGenerate] = strings.Join(gen, ",")
	sp := &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			User:            specs.User{UID: 0, GID: 0},
			Args:            withRlimitWrapper(p, processArgs(s, SkillMount, o)),
			Env:             env,
			Cwd:             cwd,
			Capabilities:    &specs.LinuxCapabilities{},
			Rlimits:         append(rlimits(p), fallbackRlimits(p)...),
			NoNewPrivileges: true,
		},
		Root:        &specs.Root{Path: "rootfs", Readonly: true},
		Hostname:    "skill",
		Mounts:      mounts,
		Annotations: ann,
		Linux: &specs.Linux{
			UIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: o.hostUID, Size: 1}},
			GIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: o.hostGID, Size: 1}},
			Resources: &specs.LinuxResources{
				Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
				Memory:  &specs.LinuxMemory{Limit: &p.Memory, Swap: &swap},
				CPU:     &specs.LinuxCPU{Quota: &quota, Period: &period},
				Pids:    &specs.LinuxPids{Limit: &p.Pids},
			},
			Namespaces:    namespaces,
			Seccomp:       Seccomp(arch),
			MaskedPaths:   clone(maskedPaths),
			ReadonlyPaths: clone(readonlyPaths),
		},
	}
	return sp, nil
}

// darwinSystemPaths are the read-only host paths a darwin skill may read
// (Seatbelt cannot remap paths, so they keep their host location).
var darwinSystemPaths = []string{
	"/usr", "/bin", "/sbin", "/System", "/Library/Frameworks", "/opt/homebrew", "/private/etc/ssl",
	"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom",
}

// generateDarwin expresses the same policy for the Seatbelt translator:
// no namespaces, no cgroups; identity bind mounts list what may be read
// (ro) or written (rw); the network mode is an annotation; rlimits apply.
func generateDarwin(s *Skill, p *Policy, o *options) (*specs.Spec, error) {
	if o.bundleDir == "" {
		return nil, errors.New("generate: darwin: the bundle folder is not set (WithBundleDir): the scratch folder lives in it")
	}
	if o.deps != nil {
		return nil, errors.New("generate: darwin: dependency environments are built and mounted on Linux only")
	}
	scratch := filepath.Join(o.bundleDir, "scratch")
	var mounts []specs.Mount
	for _, d := range darwinSystemPaths {
		mounts = append(mounts, specs.Mount{Destination: d, Type: "bind", Source: d, Options: []string{"rbind", "ro"}})
	}
	if s.Dir != "" {
		mounts = append(mounts, specs.Mount{Destination: s.Dir, Type: "bind", Source: s.Dir, Options: []string{"rbind", "ro"}})
	}
	mounts = append(mounts, specs.Mount{Destination: scratch, Type: "bind", Source: scratch, Options: []string{"rbind", "rw"}})
	if p.Workspace != "" {
		mounts = append(mounts, specs.Mount{Destination: p.Workspace, Type: "bind", Source: p.Workspace, Options: []string{"rbind", "rw"}})
	}
	env := processEnv(p, scratch, scratch, s.Dir, p.Workspace)
	cwd := scratch
	if o.exec != nil {
		// Seatbelt cannot remap paths: the container folders are the
		// host's.
		env = execEnv(env, nil, s.Dir, p)
		switch c := p.Cwd; {
		case c == SkillMount || strings.HasPrefix(c, SkillMount+"/"):
			cwd = filepath.Join(s.Dir, strings.TrimPrefix(c, SkillMount))
		case c == WorkspaceMount || strings.HasPrefix(c, WorkspaceMount+"/"):
			cwd = filepath.Join(p.Workspace, strings.TrimPrefix(c, WorkspaceMount))
		}
	}
	sp := &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			User:            specs.User{UID: uint32(o.hostUID), GID: uint32(o.hostGID)},
			Args:            processArgs(s, s.Dir, o),
			Env:             env,
			Cwd:             cwd,
			Rlimits:         rlimits(p),
			NoNewPrivileges: true,
		},
		Root:        &specs.Root{Path: "rootfs", Readonly: true},
		Mounts:      mounts,
		Annotations: annotations(s, p, "darwin"),
	}
	return sp, nil
}
