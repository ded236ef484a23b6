//go:build integration

package security_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// victim is a host process the test started as the sandbox's host uid,
// so that only the sandbox (not file permissions or uids) protects it.
// It records every catchable signal it receives into a file.
type victim struct {
	pid   int
	log   string
	token string
}

const victimPy = `import signal, sys, time
log = sys.argv[1]
def h(s, f):
    with open(log, "a") as fh:
        fh.write("%d\n" % s)
for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT,
          signal.SIGCONT, signal.SIGWINCH, signal.SIGALRM, signal.SIGPIPE):
    signal.signal(s, h)
print("ready", flush=True)
while True:
    time.sleep(1)
`

func startVictim(p *P, sk *skill) *victim {
	p.Helper()
	dir := filepath.Join(sk.base, "victim")
	os.Mkdir(dir, 0o755)
	os.Chown(dir, sk.uid, sk.uid)
	script := filepath.Join(sk.base, "victim.py")
	os.WriteFile(script, []byte(victimPy), 0o644)
	v := &victim{log: filepath.Join(dir, "signals"), token: "victim" + randHex(6)}
	cmd := exec.Command("/usr/bin/python3", script, v.log, v.token)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(sk.uid), Gid: uint32(sk.uid)}, Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		p.Fatalf("%v", err)
	}
	if err := cmd.Start(); err != nil {
		p.Fatalf("start the host victim: %v", err)
	}
	p.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		p.Fatalf("the host victim did not start: %q", line)
	}
	v.pid = cmd.Process.Pid
	return v
}

// assertUnharmed checks that the victim still runs, is not stopped or
// traced, and received no signal.
func (v *victim) assertUnharmed(p *P) {
	p.Helper()
	pi, ok := readProc(v.pid)
	if !ok || pi.state == "Z" {
		p.Errorf("LEAK: the host process %d the test started is gone (killed from the sandbox?)", v.pid)
		return
	}
	if pi.state == "T" || pi.state == "t" {
		p.Errorf("LEAK: the host process %d was stopped or traced (state %s)", v.pid, pi.state)
	}
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", v.pid))
	if !strings.Contains(string(st), "TracerPid:\t0\n") {
		p.Errorf("LEAK: the host process %d is being traced", v.pid)
	}
	if b, err := os.ReadFile(v.log); err == nil && len(b) > 0 {
		p.Errorf("LEAK: the host process %d received signals from the sandbox: %q", v.pid, b)
	}
}

// needAmd64 skips raw-syscall probes on other architectures (the syscall
// numbers in the probes are x86_64's).
func needAmd64(p *P) {
	p.Helper()
	if goruntime.GOARCH != "amd64" {
		p.Skipf("skipped: the raw syscall numbers of this probe are x86_64's; host is %s", goruntime.GOARCH)
	}
}

// denied are the errnos a denied call may return: EPERM, EACCES, ENOSYS.
func denied(v string) bool { return v == "errno 1" || v == "errno 13" || v == "errno 38" }

// assertDenied checks that every key of the probe's output starting with
// prefix reports a denial, and that there is at least one.
func assertDenied(p *P, out map[string]any, prefix string) {
	p.Helper()
	n := 0
	for k := range out {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		n++
		if v := str(out, k); !denied(v) {
			p.Errorf("LEAK: %s = %s, want EPERM, EACCES or ENOSYS", k, v)
		}
	}
	if n == 0 {
		p.Errorf("the probe reported no %q attempt", prefix)
	}
}

// TestProcHostPids: host processes are invisible in the sandbox's /proc.
func TestProcHostPids(t *testing.T) {
	probe(t, "proc/host-pids", func(p *P, m *mode) {
		sk := pyProbe(p, m, "pids", `
ps = {}
for pid in os.listdir("/proc"):
    if pid.isdigit():
        attempt("cmdline " + pid, lambda pid=pid: open("/proc/%s/cmdline" % pid, "rb").read().decode("latin-1"))
hp = REQ["pid"]
attempt("stat host pid", lambda: open("/proc/%d/cmdline" % hp, "rb").read().decode("latin-1"))
attempt("kill 0 host pid", lambda: os.kill(hp, 0))
attempt("pids", lambda: sorted(int(x) for x in os.listdir("/proc") if x.isdigit()))
done()
`, "")
		v := startVictim(p, sk)
		o := m.skill(p, sk, mustJSON(map[string]any{"pid": v.pid}))
		o.wantCode(p, 0)
		out := o.out(p)
		if strings.Contains(o.all(), v.token) {
			p.Errorf("LEAK: the host process %d (its command line) is visible in the sandbox", v.pid)
		}
		if pids, ok := out["pids"].([]any); !ok || len(pids) > 3 {
			p.Errorf("the sandbox sees more than its own processes: %v", out["pids"])
		}
		v.assertUnharmed(p)
	})
}

// TestProcSignalHost: no signal reaches a host process of the same uid.
func TestProcSignalHost(t *testing.T) {
	probe(t, "proc/signal-host", func(p *P, m *mode) {
		needAmd64(p)
		sk := pyProbe(p, m, "sig", `
import signal
hp = REQ["pid"]
for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP, signal.SIGINT, signal.SIGKILL, signal.SIGSTOP):
    attempt("kill %d" % s, lambda s=s: os.kill(hp, s))
attempt("killpg", lambda: os.killpg(hp, signal.SIGUSR2))
fd = scv(434, hp, 0)  # pidfd_open
OUT["pidfd_open"] = fd if fd < 0 else "ok"
if fd >= 0:
    OUT["pidfd_send_signal"] = sc(424, fd, signal.SIGTERM, None, 0)
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
attempt("kill -1", lambda: os.kill(-1, signal.SIGUSR1))
done()
`, "")
		v := startVictim(p, sk)
		o := m.skill(p, sk, mustJSON(map[string]any{"pid": v.pid}))
		o.wantCode(p, 0)
		o.out(p)
		time.Sleep(200 * time.Millisecond)
		v.assertUnharmed(p)
	})
}

// TestProcPtrace: ptrace and process_vm_readv fail, on a host process of
// the same uid and on the skill's own child.
func TestProcPtrace(t *testing.T) {
	probe(t, "proc/ptrace", func(p *P, m *mode) {
		needAmd64(p)
		sk := pyProbe(p, m, "ptrace", `
hp = REQ["pid"]
OUT["ptrace ATTACH host"] = "errno %d" % sc(101, 16, hp, 0, 0)
OUT["ptrace SEIZE host"] = "errno %d" % sc(101, 0x4206, hp, 0, 0)
child = os.fork()
if child == 0:
    time.sleep(5)
    os._exit(0)
OUT["ptrace ATTACH own child"] = "errno %d" % sc(101, 16, child, 0, 0)
OUT["ptrace SEIZE own child"] = "errno %d" % sc(101, 0x4206, child, 0, 0)
buf = ctypes.create_string_buffer(8)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 8)
remote = iovec(0x400000, 8)
OUT["process_vm_readv host"] = "errno %d" % sc(310, hp, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
OUT["process_vm_readv own child"] = "errno %d" % sc(310, child, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
os.kill(child, 9)
os.waitpid(child, 0)
r = os.fork()
if r == 0:
    os._exit(sc(101, 0, 0, 0, 0))  # PTRACE_TRACEME
OUT["ptrace TRACEME"] = "errno %d" % (os.waitpid(r, 0)[1] >> 8)
done()
`, "")
		v := startVictim(p, sk)
		o := m.skill(p, sk, mustJSON(map[string]any{"pid": v.pid}))
		o.wantCode(p, 0)
		out := o.out(p)
		assertDenied(p, out, "ptrace")
		assertDenied(p, out, "process_vm_readv")
		v.assertUnharmed(p)
	})
}

// mountTable is the host's mount tables (ours and pid 1's).
func mountTable() string {
	a, _ := os.ReadFile("/proc/self/mountinfo")
	b, _ := os.ReadFile("/proc/1/mountinfo")
	return string(a) + string(b)
}

// TestProcMount: mount, umount, pivot_root, chroot and the new mount API
// fail, and the host's mount table never shows the probe's mounts.
func TestProcMount(t *testing.T) {
	probe(t, "proc/mount", func(p *P, m *mode) {
		needAmd64(p)
		sk := pyProbe(p, m, "mount", `
tok = sys.argv[1].encode()
for d in ("/tmp/m1", "/tmp/m2", "/tmp/m3"):
    os.makedirs(d, exist_ok=True)
OUT["mount tmpfs"] = "errno %d" % sc(165, b"sec-" + tok, b"/tmp/m1", b"tmpfs", 0, None)
OUT["mount bind /"] = "errno %d" % sc(165, b"/", b"/tmp/m2", None, 0x1000 | 0x4000, None)
OUT["mount remount / rw"] = "errno %d" % sc(165, None, b"/", None, 0x20, None)
OUT["mount proc"] = "errno %d" % sc(165, b"sec-" + tok, b"/tmp/m3", b"proc", 0, None)
OUT["mount cgroup release_agent"] = "errno %d" % sc(165, b"sec-" + tok, b"/tmp/m3", b"cgroup", 0, b"rdma,release_agent=/tmp/x")
OUT["mount cgroup2"] = "errno %d" % sc(165, b"sec-" + tok, b"/tmp/m3", b"cgroup2", 0, None)
OUT["mount umount2 /proc"] = "errno %d" % sc(166, b"/proc", 2)
OUT["mount umount2 /usr"] = "errno %d" % sc(166, b"/usr", 2)
OUT["mount pivot_root"] = "errno %d" % sc(155, b"/tmp", b"/tmp/m1")
OUT["mount chroot"] = "errno %d" % sc(161, b"/tmp")
OUT["mount fsopen"] = "errno %d" % sc(430, b"tmpfs", 0)
OUT["mount open_tree"] = "errno %d" % sc(428, -100, b"/usr", 1)
OUT["mount move_mount"] = "errno %d" % sc(429, -100, b"/usr", -100, b"/tmp/m1", 0)
OUT["mount mount_setattr"] = "errno %d" % sc(442, -100, b"/", 0, None, 0)
import subprocess
r = subprocess.run(["/usr/bin/mount", "-t", "tmpfs", "sec-" + sys.argv[1], "/tmp/m1"], capture_output=True, text=True)
OUT["mount(8) exit"] = r.returncode
OUT["mountinfo"] = open("/proc/self/mountinfo").read().count("\n")
done()
`, "")
		o := m.skill(p, sk, "{}")
		o.wantCode(p, 0)
		out := o.out(p)
		assertDenied(p, out, "mount ")
		if v, _ := out["mount(8) exit"].(float64); v == 0 {
			p.Errorf("LEAK: mount(8) succeeded inside the sandbox")
		}
		if strings.Contains(mountTable(), sk.token) {
			p.Errorf("LEAK: a mount of the probe appears in the host's mount table")
		}
	})
}

// TestProcUnshareSetns: new namespaces cannot be made or joined.
func TestProcUnshareSetns(t *testing.T) {
	probe(t, "proc/unshare-setns", func(p *P, m *mode) {
		needAmd64(p)
		sk := pyProbe(p, m, "ns", `
flags = {"NEWNS": 0x20000, "NEWCGROUP": 0x2000000, "NEWUTS": 0x4000000, "NEWIPC": 0x8000000,
         "NEWUSER": 0x10000000, "NEWPID": 0x20000000, "NEWNET": 0x40000000, "NEWTIME": 0x80}
for k, f in flags.items():
    OUT["unshare " + k] = "errno %d" % sc(272, f)
for ns in ("mnt", "user", "pid", "net", "uts", "ipc", "cgroup", "time"):
    try:
        fd = os.open("/proc/1/ns/" + ns, os.O_RDONLY)
        OUT["setns " + ns] = "errno %d" % sc(308, fd, 0)
        os.close(fd)
    except OSError as e:
        OUT["setns " + ns] = "errno %d" % e.errno
for k, f in flags.items():
    if k == "NEWTIME":
        continue
    r = scv(56, f | 17, 0, 0, 0, 0)   # raw clone(flags|SIGCHLD)
    if r == 0:
        os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
        OUT["clone " + k] = "ok"
    else:
        OUT["clone " + k] = "errno %d" % -r
class clone_args(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("flags", "pidfd", "child_tid", "parent_tid", "exit_signal",
                "stack", "stack_size", "tls", "set_tid", "set_tid_size", "cgroup")]
ca = clone_args(flags=0x10000000, exit_signal=17)
r = scv(435, ctypes.byref(ca), ctypes.sizeof(ca))
if r == 0:
    os._exit(0)
OUT["clone3 NEWUSER"] = "ok" if r > 0 else "errno %d" % -r
import subprocess
r = subprocess.run(["/usr/bin/unshare", "-U", "-r", "true"], capture_output=True)
OUT["unshare(1) exit"] = r.returncode
done()
`, "")
		o := m.skill(p, sk, "{}")
		o.wantCode(p, 0)
		out := o.out(p)
		for _, prefix := range []string{"unshare ", "setns ", "clone ", "clone3 "} {
			assertDenied(p, out, prefix)
		}
		if v, _ := out["unshare(1) exit"].(float64); v == 0 {
			p.Errorf("LEAK: unshare(1) -U -r succeeded inside the sandbox")
		}
	})
}

// syscallProbe is a probe whose calls must all be denied.
type syscallProbe struct {
	id, short, body, prefix string
	host                    func(p *P, sk *skill)
}

var syscallProbes = []syscallProbe{
	{id: "proc/bpf", short: "bpf", prefix: "bpf", body: `
attr = (ctypes.c_uint32 * 32)(2, 4, 4, 1)   # BPF_MAP_TYPE_ARRAY, key 4, value 4, 1 entry
OUT["bpf MAP_CREATE"] = "errno %d" % sc(321, 0, ctypes.byref(attr), 128)
insns = (ctypes.c_uint64 * 2)(0x00000000000000b7, 0x0000000000000095)  # r0 = 0; exit
lic = ctypes.create_string_buffer(b"GPL")
prog = (ctypes.c_uint64 * 16)()
ctypes.memmove(prog, (ctypes.c_uint32 * 4)(1, 2, 0, 0), 16)  # SOCKET_FILTER, 2 insns
prog[1] = ctypes.addressof(insns)
prog[2] = ctypes.addressof(lic)
OUT["bpf PROG_LOAD"] = "errno %d" % sc(321, 5, ctypes.byref(prog), 128)
done()
`},
	{id: "proc/keyctl", short: "key", prefix: "key", body: `
tok = b"sec-" + sys.argv[1].encode()
OUT["key add_key session"] = "errno %d" % sc(248, b"user", tok, b"payload", 7, -3)
OUT["key add_key user"] = "errno %d" % sc(248, b"user", tok, b"payload", 7, -4)
OUT["key request_key"] = "errno %d" % sc(249, b"user", tok, None, 0)
OUT["key keyctl JOIN_SESSION_KEYRING"] = "errno %d" % sc(250, 1, tok)
OUT["key keyctl GET_KEYRING_ID"] = "errno %d" % sc(250, 0, -4, 0)
attempt("/proc/keys", lambda: open("/proc/keys").read())
done()
`, host: func(p *P, sk *skill) {
		if b, _ := os.ReadFile("/proc/keys"); strings.Contains(string(b), sk.token) {
			p.Errorf("LEAK: the probe's key appears in the host's /proc/keys")
		}
	}},
	{id: "proc/perf_event_open", short: "perf", prefix: "perf", body: `
attr = (ctypes.c_uint32 * 32)(1, 128)   # PERF_TYPE_SOFTWARE, size 128, config 0 (cpu-clock)
OUT["perf cpu-clock self"] = "errno %d" % sc(298, ctypes.byref(attr), 0, -1, -1, 0)
OUT["perf cpu-clock all cpus"] = "errno %d" % sc(298, ctypes.byref(attr), -1, 0, -1, 0)
hw = (ctypes.c_uint32 * 32)(0, 128)     # PERF_TYPE_HARDWARE cycles
OUT["perf cycles self"] = "errno %d" % sc(298, ctypes.byref(hw), 0, -1, -1, 0)
done()
`},
	{id: "proc/io_uring", short: "uring", prefix: "io_uring", body: `
params = (ctypes.c_uint32 * 30)()
OUT["io_uring_setup"] = "errno %d" % sc(425, 8, ctypes.byref(params))
OUT["io_uring_enter"] = "errno %d" % sc(426, 0, 0, 0, 0, None, 0)
OUT["io_uring_register"] = "errno %d" % sc(427, 0, 0, None, 0)
done()
`},
	{id: "proc/modules", short: "mod", prefix: "module", body: `
img = ctypes.create_string_buffer(b"\x7fELF" + b"\0" * 60)
OUT["module init_module"] = "errno %d" % sc(175, img, 64, b"")
fd = os.open("/dev/null", os.O_RDONLY)
OUT["module finit_module"] = "errno %d" % sc(313, fd, b"", 0)
OUT["module delete_module"] = "errno %d" % sc(176, b"sec_" + sys.argv[1].encode(), 0o4000)
attempt("/proc/modules", lambda: open("/proc/modules").read())
done()
`, host: func(p *P, sk *skill) {
		if b, _ := os.ReadFile("/proc/modules"); strings.Contains(string(b), sk.token) {
			p.Errorf("LEAK: a module of the probe is loaded on the host")
		}
	}},
}

// TestProcSyscalls: bpf, keyctl, perf_event_open, io_uring and module
// loading are denied (errno), and their host-visible effects are absent.
func TestProcSyscalls(t *testing.T) {
	for _, sp := range syscallProbes {
		t.Run(strings.TrimPrefix(sp.id, "proc/"), func(t *testing.T) {
			probe(t, sp.id, func(p *P, m *mode) {
				needAmd64(p)
				before, _ := os.ReadFile("/proc/modules")
				sk := pyProbe(p, m, sp.short, sp.body, "")
				o := m.skill(p, sk, "{}")
				o.wantCode(p, 0)
				assertDenied(p, o.out(p), sp.prefix)
				if sp.host != nil {
					sp.host(p, sk)
				}
				if after, _ := os.ReadFile("/proc/modules"); string(after) != string(before) {
					p.Errorf("LEAK: the host's module list changed during the probe")
				}
			})
		})
	}
}

// compatChild runs one raw syscall through the i386 (int 0x80) or the x32
// ABI: mkdir(argv[2], 0755). It prints the syscall's return value; the
// kernel may kill it instead (SIGSYS from a seccomp filter, SIGSEGV where
// the kernel has no ia32 emulation).
const compatChild = `import ctypes, mmap, sys
kind, path = sys.argv[1], sys.argv[2].encode() + b"\0"
MAP_32BIT = 0x40  # int 0x80 takes 32-bit pointers
buf = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_32BIT,
                prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
assert base < 1 << 32, hex(base)
buf[256:256 + len(path)] = path
a = base + 256
le = lambda v, n: v.to_bytes(n, "little")
if kind == "i386":  # push rbx; mov eax,39 (mkdir); mov ebx,path; mov ecx,0755; int 0x80; pop rbx; ret
    code = b"\x53\xb8" + le(39, 4) + b"\xbb" + le(a, 4) + b"\xb9" + le(0o755, 4) + b"\xcd\x80\x5b\xc3"
else:  # mov eax,0x40000000|83 (x32 mkdir); mov rdi,path; mov esi,0755; syscall; ret
    code = b"\xb8" + le(0x40000000 | 83, 4) + b"\x48\xbf" + le(a, 8) + b"\xbe" + le(0o755, 4) + b"\x0f\x05\xc3"
buf[0:len(code)] = code
print(ctypes.CFUNCTYPE(ctypes.c_int)(base)(), flush=True)
`

// compatHost is what the host itself does with compatChild, outside any
// sandbox: whether each ABI created its directory, and how the child ended.
type compatHost struct {
	created map[string]bool
	status  map[string]string
	err     error
}

var (
	compatHostOnce sync.Once
	compatHostRes  compatHost
)

// hostCompatABI runs compatChild on the host once (the control of
// TestProcCompatABI): a kernel without ia32 emulation faults on int 0x80
// (SIGSEGV) before any seccomp filter sees the call, and a kernel without
// x32 answers ENOSYS; the sandbox can then only be asked not to leak.
func hostCompatABI() compatHost {
	compatHostOnce.Do(func() {
		r := &compatHostRes
		r.created, r.status = map[string]bool{}, map[string]string{}
		py, err := exec.LookPath("python3")
		if err != nil {
			r.err = fmt.Errorf("no python3 on the host to run the control: %w", err)
			return
		}
		dir, err := os.MkdirTemp("", "skillrun-sec-compat-")
		if err != nil {
			r.err = err
			return
		}
		defer os.RemoveAll(dir)
		for _, kind := range []string{"i386", "x32"} {
			target := filepath.Join(dir, kind)
			out, err := exec.Command(py, "-c", compatChild, kind, target).CombinedOutput()
			st := "exit 0"
			if ee, ok := err.(*exec.ExitError); ok {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					st = "killed by " + ws.Signal().String()
				} else {
					st = fmt.Sprintf("exit %d", ee.ExitCode())
				}
			} else if err != nil {
				st = err.Error()
			}
			r.status[kind] = fmt.Sprintf("%s: %s", st, strings.TrimSpace(string(out)))
			_, err = os.Stat(target)
			r.created[kind] = err == nil
		}
	})
	return compatHostRes
}

// TestProcCompatABI: the 32-bit compat syscall ABI (int 0x80) and x32 are
// closed. The probe asks for a directory in its granted workspace three
// ways: the native syscall (the control, which must appear on the host),
// i386's mkdir through int 0x80, and x32's mkdir; the host checks that
// only the control exists. Under the earlier filter, which listed the
// i386 and x32 ABIs next to x86_64, int 0x80 created its directory (the
// compat ABI, a kernel surface of its own, was open); x32 is not built
// into every kernel (then it fails either way). The same child runs on
// the host first, outside any sandbox: SIGSYS from the filter is asserted
// only where the host's own int 0x80 works (a kernel without ia32
// emulation kills it with SIGSEGV before seccomp sees it); the LEAK check
// holds everywhere.
func TestProcCompatABI(t *testing.T) {
	probe(t, "proc/compat-abi", func(p *P, m *mode) {
		needAmd64(p)
		host := hostCompatABI()
		if host.err != nil {
			p.Skipf("skipped: %v", host.err)
		}
		sk := pyProbe(p, m, "abi", `
import mmap, subprocess
CHILD = REQ["child"]
attempt("native mkdir", lambda: os.mkdir("/workspace/" + REQ["native"]))
for kind in ("i386", "x32"):
    r = subprocess.run([sys.executable, "-c", CHILD, kind, "/workspace/" + REQ[kind]], capture_output=True, text=True)
    OUT[kind] = "returncode %d: %s %s" % (r.returncode, r.stdout.strip(), r.stderr.strip()[-200:])
done()
`, "")
		ws := filepath.Join(sk.base, "ws")
		if err := os.Mkdir(ws, 0o755); err != nil {
			p.Fatalf("%v", err)
		}
		os.Chown(ws, sk.uid, sk.uid)
		if m.rootless() {
			os.Chown(ws, m.uid, m.gid)
		}
		names := map[string]string{"native": "native-" + sk.token, "i386": "i386-" + sk.token, "x32": "x32-" + sk.token, "child": compatChild}
		o := m.skill(p, sk, mustJSON(names), "--workspace", ws)
		o.wantCode(p, 0)
		out := o.out(p)
		if _, err := os.Stat(filepath.Join(ws, names["native"])); err != nil {
			p.Fatalf("the control (a native mkdir in the workspace) did not reach the host, so the probe proves nothing: %s (%v)", str(out, "native mkdir"), err)
		}
		for _, kind := range []string{"i386", "x32"} {
			if _, err := os.Stat(filepath.Join(ws, names[kind])); err == nil {
				p.Errorf("LEAK: the %s syscall ABI is open: it created %s on the host (%s)", kind, names[kind], str(out, kind))
			}
		}
		// int 0x80 meets the filter's bad-arch action: SIGSYS, where the
		// host's own int 0x80 reaches the syscall table at all.
		if !host.created["i386"] {
			p.Logf("the host itself cannot run int 0x80 (%s): only the LEAK check holds; in the sandbox: %s", host.status["i386"], str(out, "i386"))
			return
		}
		if v := str(out, "i386"); !strings.HasPrefix(v, "returncode -31") {
			p.Errorf("int 0x80 in the sandbox: %s, want the child killed by SIGSYS (returncode -31); on the host it created its directory (%s)", v, host.status["i386"])
		}
	})
}
