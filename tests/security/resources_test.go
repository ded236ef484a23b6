//go:build integration

package security_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// needEnforced checks, from a trivial run of the mode's caller, what the
// result says enforces limit ("memory", "pids"): cgroups, or rootless
// without delegated cgroups the rlimit that stands in (want). It skips the
// probe when the result honestly reports the limit as not enforced (an
// old kernel without per-user-namespace RLIMIT_NPROC), and fails when the
// report is inconsistent. It returns the mechanism.
func needEnforced(p *P, m *mode, limit, want string) string {
	p.Helper()
	sk := pyProbe(p, m, "lim", "done()\n", "")
	o := m.skill(p, sk, "{}")
	o.wantCode(p, 0)
	l := o.res.Limits
	if l == nil {
		p.Fatalf("the result has no limits\n%s", o)
	}
	e, ok := l.Enforcement[limit]
	if !ok {
		p.Fatalf("the result's limits.enforcement has no %s\n%s", limit, o)
	}
	notEnforced := strings.Contains(strings.Join(l.NotEnforced, ","), limit)
	switch {
	case l.Cgroups:
		if e.EnforcedBy != "cgroup" || notEnforced {
			p.Fatalf("the result says cgroups=true but %s is enforced by %q (not_enforced %v)\n%s", limit, e.EnforcedBy, l.NotEnforced, o)
		}
	case !m.rootless():
		p.Fatalf("as root the sandbox must have cgroups\n%s", o)
	case e.EnforcedBy == "none":
		if !notEnforced {
			p.Fatalf("the result says %s is enforced by none but does not list it in not_enforced\n%s", limit, o)
		}
		p.Skipf("skipped: the %s limit is not enforced rootless on this host (no delegated cgroups, and no rlimit stands in: %v)", limit, o.res.Warnings)
	case e.EnforcedBy != want || notEnforced:
		p.Fatalf("rootless without cgroups: %s enforced by %q (not_enforced %v), want %s\n%s", limit, e.EnforcedBy, l.NotEnforced, want, o)
	}
	p.Logf("%s enforced by %s", limit, e.EnforcedBy)
	return e.EnforcedBy
}

// rssAnon is a process' resident anonymous memory in bytes, from the
// host (file pages are shared with the host's page cache).
func rssAnon(pid int) int64 { return rss(pid, "RssAnon:") }

// rss is the status field (kB) of pid in bytes.
func rss(pid int, field string) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestResMemory: a memory bomb is stopped at the limit (exit 5, memory).
func TestResMemory(t *testing.T) {
	probe(t, "res/memory-bomb", func(p *P, m *mode) {
		needEnforced(p, m, "memory", "rlimit_as")
		sk := pyProbe(p, m, "mem", `
hog = []
while True:
    hog.append(b"\x01" * (4 << 20))
`, "limits:\n  memory: 64Mi\n  timeout: 20s\n")
		var mu sync.Mutex
		var peak int64
		var s *sampler
		o := m.run(p, sk, runOpts{during: func() {
			s = startSampler(sk, m, func(ps []procInfo) {
				var sum int64
				for _, pi := range ps {
					sum += rssAnon(pi.pid)
				}
				mu.Lock()
				if sum > peak {
					peak = sum
				}
				mu.Unlock()
			})
		}})
		s.Stop()
		o.wantCode(p, 5)
		if o.res.StoppedReason != "memory" || o.res.Limits == nil || o.res.Limits.MemoryBytes == nil || *o.res.Limits.MemoryBytes != 64<<20 {
			p.Errorf("want stopped_reason memory and memory_bytes 64Mi\n%s", o)
		}
		if peak > 64<<20+(4<<20) {
			p.Errorf("LEAK: the host saw the sandbox use %d bytes of memory, above the 64Mi limit", peak)
		}
		p.Logf("peak anonymous RSS seen from the host: %d MiB", peak>>20)
	})
}

// TestResMemoryShared: a memory bomb made of shared anonymous mappings
// (Python's mmap.mmap(-1, n) is MAP_SHARED), which RLIMIT_DATA does not
// count, is stopped at the limit too: by the memory cgroup (shmem is
// charged to it) or, rootless without cgroups, by RLIMIT_AS.
func TestResMemoryShared(t *testing.T) {
	probe(t, "res/memory-bomb-shared", func(p *P, m *mode) {
		needEnforced(p, m, "memory", "rlimit_as")
		sk := pyProbe(p, m, "shm", `
import mmap
hog = []
while True:
    mm = mmap.mmap(-1, 4 << 20)
    mm.write(b"\x01" * (4 << 20))
    hog.append(mm)
`, "limits:\n  memory: 64Mi\n  timeout: 20s\n")
		var mu sync.Mutex
		var peak int64
		var s *sampler
		o := m.run(p, sk, runOpts{during: func() {
			s = startSampler(sk, m, func(ps []procInfo) {
				var sum int64
				for _, pi := range ps {
					sum += rss(pi.pid, "RssAnon:") + rss(pi.pid, "RssShmem:")
				}
				mu.Lock()
				if sum > peak {
					peak = sum
				}
				mu.Unlock()
			})
		}})
		s.Stop()
		o.wantCode(p, 5)
		if o.res.StoppedReason != "memory" {
			p.Errorf("want stopped_reason memory\n%s", o)
		}
		if peak > 64<<20+(4<<20) {
			p.Errorf("LEAK: the host saw the sandbox use %d bytes of anonymous and shared memory, above the 64Mi limit", peak)
		}
		p.Logf("peak anonymous+shared RSS seen from the host: %d MiB", peak>>20)
	})
}

// TestResPidsPerSandbox: the task limit counts the sandbox's tasks only,
// not other processes of its host uid: with 40 host processes of that uid
// running, a skill limited to 32 tasks still forks 20 children. Rootless
// without cgroups this is RLIMIT_NPROC counted per user namespace.
func TestResPidsPerSandbox(t *testing.T) {
	probe(t, "res/pids-per-sandbox", func(p *P, m *mode) {
		needEnforced(p, m, "pids", "rlimit_nproc")
		sk := pyProbe(p, m, "pidns", `
kids = []
for i in range(20):
    pid = os.fork()
    if pid == 0:
        time.sleep(1)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
OUT["forked"] = len(kids)
done()
`, "limits:\n  pids: 32\n  timeout: 20s\n")
		var hosts []*exec.Cmd
		p.Cleanup(func() {
			for _, c := range hosts {
				c.Process.Kill()
				c.Wait()
			}
		})
		for i := 0; i < 40; i++ {
			c := exec.Command("sleep", "60")
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(sk.uid), Gid: uint32(sk.uid)}}
			if m.rootless() {
				c.SysProcAttr.Credential.Gid = uint32(m.gid)
			}
			if err := c.Start(); err != nil {
				p.Fatalf("start a host process as uid %d: %v", sk.uid, err)
			}
			hosts = append(hosts, c)
		}
		o := m.skill(p, sk, "{}")
		o.wantCode(p, 0)
		if v := str(o.out(p), "forked"); v != "20" {
			p.Errorf("the skill forked %s children with 40 host processes of its uid running, want 20 (the limit is per sandbox)", v)
		}
	})
}

// TestResForkBomb: a fork bomb stops at the pids limit, the host never
// sees more sandbox tasks than the limit, and none remains.
func TestResForkBomb(t *testing.T) {
	probe(t, "res/fork-bomb", func(p *P, m *mode) {
		needEnforced(p, m, "pids", "rlimit_nproc")
		sk := pyProbe(p, m, "fork", `
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError as e:
    sys.stderr.write("forked %d: %s\n" % (n, e))
    sys.stderr.flush()
    time.sleep(1)  # hold the bomb so that the host sees its peak
    sys.exit(1)
`, "limits:\n  pids: 32\n  timeout: 20s\n")
		before := len(scanProcs())
		var s *sampler
		o := m.run(p, sk, runOpts{during: func() { s = startSampler(sk, m, nil) }})
		s.Stop()
		o.wantCode(p, 3)
		if o.res.StoppedReason != "pids" {
			p.Errorf("want stopped_reason pids\n%s", o)
		}
		if s.peak > 32 {
			p.Errorf("LEAK: the host saw %d sandbox processes, above the pids limit of 32", s.peak)
		}
		if s.peak < 10 {
			p.Errorf("the host saw only %d sandbox processes: the bomb did not go off", s.peak)
		}
		p.Logf("host processes before %d, after %d; peak of the sandbox %d", before, len(scanProcs()), s.peak)
	})
}

// TestResForkBombShell: the classic shell fork bomb is contained too.
func TestResForkBombShell(t *testing.T) {
	probe(t, "res/fork-bomb-sh", func(p *P, m *mode) {
		needEnforced(p, m, "pids", "rlimit_nproc")
		sk := newSkill(p, m, "forksh", map[string]string{"scripts/main.sh": "bomb() { bomb | bomb & }\nbomb\nwait\nsleep 30\n"}, "limits:\n  pids: 32\n  timeout: 3s\n  output: 64Ki\n")
		var s *sampler
		o := m.run(p, sk, runOpts{during: func() { s = startSampler(sk, m, nil) }})
		s.Stop()
		if o.code != 3 && o.code != 4 && o.code != 7 {
			p.Errorf("want the bomb stopped (exit 3, 4 or 7)\n%s", o)
		}
		if s.peak > 32 {
			p.Errorf("LEAK: the host saw %d sandbox processes, above the pids limit of 32", s.peak)
		}
		// Sanity (the shell's processes churn too fast to sample a peak
		// reliably): the bomb went off when the shell hit the limit.
		if s.peak < 10 && !strings.Contains(o.res.Stderr, "Cannot fork") {
			p.Errorf("the host saw only %d sandbox processes and the shell never hit the limit: the bomb did not go off", s.peak)
		}
		p.Logf("peak of the sandbox seen from the host: %d", s.peak)
	})
}

// TestResCPU: a CPU loop (in two processes) is stopped by the timeout.
func TestResCPU(t *testing.T) {
	probe(t, "res/cpu-timeout", func(p *P, m *mode) {
		sk := pyProbe(p, m, "cpu", `
os.fork()
while True:
    pass
`, "limits:\n  timeout: 2s\n")
		start := time.Now()
		o := m.skill(p, sk, "{}")
		o.wantCode(p, 4)
		if o.res.StoppedReason != "timeout" {
			p.Errorf("want stopped_reason timeout\n%s", o)
		}
		if d := time.Since(start); d > 10*time.Second {
			p.Errorf("a 2s timeout took %v", d)
		}
	})
}

// TestResScratch: filling the scratch tmpfs stops at its size; the host
// measures the sandbox's /tmp and /dev/shm through /proc/PID/root.
func TestResScratch(t *testing.T) {
	probe(t, "res/scratch-fill", func(p *P, m *mode) {
		sk := pyProbe(p, m, "fill", `
def fill(path):
    n = 0
    try:
        with open(path, "wb") as f:
            while True:
                f.write(b"\x01" * 65536)
                f.flush()
                n += 65536
    except OSError as e:
        return [n, e.errno]
OUT["/tmp"] = fill("/tmp/fill")
OUT["/tmp 2"] = fill("/tmp/fill2")
OUT["/dev/shm"] = fill("/dev/shm/fill")
time.sleep(1.5)
done()
`, "limits:\n  scratch: 8Mi\n  timeout: 20s\n")
		var mu sync.Mutex
		sizes := map[string][2]uint64{}
		var s *sampler
		o := m.run(p, sk, runOpts{during: func() {
			var hostRoot unix.Stat_t
			if err := unix.Stat("/", &hostRoot); err != nil {
				p.Fatalf("stat /: %v", err)
			}
			s = startSampler(sk, m, func(ps []procInfo) {
				for _, pi := range ps {
					// The init, before its pivot_root, still has the
					// host's root: it is not in the sandbox yet.
					var root unix.Stat_t
					if unix.Stat(fmt.Sprintf("/proc/%d/root/", pi.pid), &root) != nil || (root.Dev == hostRoot.Dev && root.Ino == hostRoot.Ino) {
						continue
					}
					for _, d := range []string{"tmp", "dev/shm"} {
						var st unix.Statfs_t
						if unix.Statfs(fmt.Sprintf("/proc/%d/root/%s", pi.pid, d), &st) == nil {
							mu.Lock()
							used := (st.Blocks - st.Bfree) * uint64(st.Bsize)
							if used >= sizes[d][1] {
								sizes[d] = [2]uint64{st.Blocks * uint64(st.Bsize), used}
							}
							mu.Unlock()
						}
					}
				}
			})
		}})
		s.Stop()
		o.wantCode(p, 0)
		out := o.out(p)
		for _, d := range []string{"tmp", "dev/shm"} {
			sz, ok := sizes[d]
			if !ok {
				p.Fatalf("the host could not measure the sandbox's /%s", d)
			}
			if sz[0] > 8<<20 || sz[1] > 8<<20 {
				p.Errorf("LEAK: the sandbox's /%s is %d bytes with %d used, above 8Mi", d, sz[0], sz[1])
			}
			p.Logf("/%s seen from the host: size %d, used %d", d, sz[0], sz[1])
		}
		for _, k := range []string{"/tmp", "/tmp 2", "/dev/shm"} {
			v, _ := out[k].([]any)
			if len(v) != 2 {
				p.Fatalf("%s: %v", k, out[k])
			}
			if e, _ := v[1].(float64); e != 28 && e != 27 {
				p.Errorf("filling %s stopped with errno %v, want ENOSPC or EFBIG", k, e)
			}
		}
	})
}

// TestResOutput: an output flood (stdout and stderr) is capped.
func TestResOutput(t *testing.T) {
	probe(t, "res/output-flood", func(p *P, m *mode) {
		for _, stream := range []string{"stdout", "stderr"} {
			sk := pyProbe(p, m, "out"+stream[3:], `
s = getattr(sys, REQ["stream"])
while True:
    s.write("x" * 65536)
    s.flush()
`, "limits:\n  output: 64Ki\n  timeout: 20s\n")
			o := m.skill(p, sk, mustJSON(map[string]any{"stream": stream}))
			o.wantCode(p, 7)
			if o.res.StoppedReason != "output_limit" {
				p.Errorf("%s: want stopped_reason output_limit\n%s", stream, o)
			}
			if n := len(o.stdout) + len(o.stderr); n > 2*(64<<10)+16<<10 {
				p.Errorf("LEAK: %s flood: skillrun printed %d bytes with a 64Ki cap", stream, n)
			}
		}
	})
}

// TestResDelegatedScope: rootless on a host whose systemd delegates cgroups
// to the user (systemd is PID 1, cgroup v2, the user's manager has memory
// and pids), a skill gets a cgroup of its own in a transient scope of the
// user's systemd instance, and its limits are enforced by cgroups. The host
// checks the sandbox's cgroup in /proc/PID/cgroup.
func TestResDelegatedScope(t *testing.T) {
	probe(t, "res/delegated-scope", func(p *P, m *mode) {
		if !m.rootless() {
			p.Skipf("skipped: rootless only (root has cgroups of its own)")
		}
		if _, err := os.Stat("/run/systemd/system"); err != nil {
			p.Skipf("skipped: systemd is not running on this host (no /run/systemd/system): no delegated scope to test")
		}
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
			p.Skipf("skipped: the host does not use the unified cgroup hierarchy; systemd delegates no v1 controllers to users")
		}
		mgr := fmt.Sprintf("/sys/fs/cgroup/user.slice/user-%d.slice/user@%d.service", m.uid, m.uid)
		ctl, err := os.ReadFile(mgr + "/cgroup.controllers")
		if err != nil || !strings.Contains(string(ctl), "memory") || !strings.Contains(string(ctl), "pids") {
			p.Skipf("skipped: the systemd user manager of uid %d is not running or not delegated memory and pids (%s: %q %v); start it with loginctl enable-linger", m.uid, mgr, ctl, err)
		}
		if fi, err := os.Stat(m.xdg() + "/bus"); err != nil || fi.Mode()&os.ModeSocket == 0 {
			p.Skipf("skipped: no user bus at %s/bus", m.xdg())
		}
		sk := pyProbe(p, m, "scope", `
time.sleep(1)
OUT["cgroup"] = open("/proc/self/cgroup").read()
done()
`, "limits:\n  memory: 64Mi\n  pids: 32\n")
		var mu sync.Mutex
		cgs := map[string]bool{}
		var s *sampler
		o := m.run(p, sk, runOpts{during: func() {
			s = startSampler(sk, m, func(ps []procInfo) {
				for _, pi := range ps {
					if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pi.pid)); err == nil {
						mu.Lock()
						cgs[strings.TrimSpace(string(b))] = true
						mu.Unlock()
					}
				}
			})
		}})
		s.Stop()
		o.wantCode(p, 0)
		if l := o.res.Limits; l == nil || !l.Cgroups || l.Enforcement["memory"].EnforcedBy != "cgroup" || l.Enforcement["pids"].EnforcedBy != "cgroup" {
			p.Fatalf("rootless with a delegated systemd scope: want cgroups and enforcement by cgroup\n%s", o)
		}
		in := false
		for cg := range cgs {
			if strings.Contains(cg, fmt.Sprintf("user@%d.service", m.uid)) && strings.Contains(cg, ".scope") {
				in = true
			}
		}
		if !in {
			p.Errorf("the host never saw the sandbox in a scope under user@%d.service: %v", m.uid, cgs)
		}
	})
}

// cpuBurner is Python that keeps every core busy from one process:
// hashlib releases the GIL for large buffers, so its threads run in
// parallel and the process' CPU time (what RLIMIT_CPU counts) grows
// faster than the wall clock. Sixteen threads: the scheduler shares the
// CPUs between threads, so on a busy host more threads get the process a
// larger share.
const cpuBurner = `
import hashlib, threading
buf = b"x" * (1 << 20)
def burn():
    while True:
        hashlib.sha256(buf).digest()
for _ in range(16):
    threading.Thread(target=burn, daemon=True).start()
`

// procCPU is the CPU time (user + system, all threads) of pid as the
// host's /proc/PID/stat shows it.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces), from field 3.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// TestResCPUTimeBackstop: rootless without delegated cgroups, one process
// burning more than one core is stopped by the RLIMIT_CPU backstop
// (stopped_reason cpu_time) before the wall-clock timeout. The backstop is
// ceil(timeout x max(cpus, 1)) + 1 CPU seconds per process: 21 s for a 20 s
// timeout, reached after about 11 s on two free cores (2Gi of memory:
// without cgroups that is RLIMIT_AS, and each thread reserves a stack and
// a malloc arena). What the host can
// show decides: the control runs the same burner on the host first (one
// core, or a host too busy to give one process more than one, cannot
// show the backstop), and the host samples the sandbox process' CPU time
// during the run: a run the host gave too little CPU to reach the
// backstop skips; one that reached it must report cpu_time; none may pass
// the hard limit.
func TestResCPUTimeBackstop(t *testing.T) {
	probe(t, "res/cpu-time-backstop", func(p *P, m *mode) {
		if !m.rootless() {
			p.Skipf("skipped: as root the sandbox has cgroups (CPU quota), no RLIMIT_CPU backstop")
		}
		const timeout, backstop = 20 * time.Second, 21 * time.Second
		ctl := exec.Command("python3", "-c", cpuBurner+`
import os, time
t0 = time.time(); c0 = sum(os.times()[:2])
time.sleep(1)
print((sum(os.times()[:2]) - c0) / (time.time() - t0))
`)
		out, err := ctl.Output()
		if err != nil {
			p.Fatalf("control on the host: %v", err)
		}
		rate, _ := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		p.Logf("control: the burner got %.2f cores on the host", rate)
		if rate < 1.1 {
			p.Skipf("skipped: one process gets only %.2f cores on this host now (one core, or busy): the %v backstop would not come before the %v timeout", rate, backstop, timeout)
		}
		sk := pyProbe(p, m, "cputime", cpuBurner+`
while True:
    time.sleep(1)
`, "limits:\n  timeout: 20s\n  cpus: 0.5\n  memory: 2Gi\n")
		// The host looks every 100 ms (not startSampler's 5 ms: its scans
		// of /proc would take a core from the burner).
		var peak time.Duration
		var reached time.Duration // wall time when the host first saw the backstop crossed
		stop, done := make(chan struct{}), make(chan struct{})
		start := time.Now()
		o := m.run(p, sk, runOpts{during: func() {
			go func() {
				defer close(done)
				for {
					for _, pi := range sandboxProcs(sk, m) {
						peak = max(peak, procCPU(pi.pid))
					}
					if reached == 0 && peak >= backstop {
						reached = time.Since(start)
					}
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
					}
				}
			}()
		}})
		wall := time.Since(start)
		close(stop)
		<-done
		o.wantCode(p, 4)
		if o.res.Limits == nil || o.res.Limits.Cgroups {
			p.Skipf("skipped: the sandbox has cgroups here (delegated): no RLIMIT_CPU backstop\n%s", o)
		}
		if e := o.res.Limits.Enforcement["cpu_time"]; e.EnforcedBy != "rlimit_cpu" || e.Limit != backstop.Seconds() {
			p.Errorf("limits.enforcement.cpu_time = %+v, want %v by rlimit_cpu\n%s", e, backstop.Seconds(), o)
		}
		// From the host: no process of the sandbox used more than the hard
		// limit (soft limit + 1 s), give or take the sampling interval.
		if peak > backstop+time.Second+200*time.Millisecond {
			p.Errorf("LEAK: the host saw a sandbox process use %v of CPU, above the %v backstop's hard limit", peak, backstop+time.Second)
		}
		// A busy host may give the burner the backstop's CPU only as the
		// wall clock runs out: then the two limits race and either may win.
		if o.res.StoppedReason == "timeout" && (reached == 0 || reached > timeout-time.Second) {
			p.Skipf("skipped: the host gave the burner only %v of CPU in %v (busy host; backstop crossed at %v): the %v backstop could not come clearly before the timeout", peak, wall, reached, backstop)
		}
		if o.res.StoppedReason != "cpu_time" {
			p.Errorf("the host saw a sandbox process use %v of CPU (backstop %v) in %v, want stopped_reason cpu_time\n%s", peak, backstop, wall, o)
		}
		if wall >= timeout {
			p.Errorf("the run took %v: not stopped before the wall-clock timeout (%v)", wall, timeout)
		}
		p.Logf("stopped after %v wall, peak CPU time of one sandbox process seen from the host: %v", wall, peak)
	})
}
