//go:build integration

package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Command-line behaviours scripts and tools rely on, checked against the
// runtime under test and against runc (RUNTIME=runc) with the same code.

// TestCLIFlagsAfterID: runc (urfave/cli v1) accepts a verb's flags after
// the container ID; the effect is checked on the host.
func TestCLIFlagsAfterID(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := newRT(t)
	b := newBundle(t, nil, "sleep", "1000")
	c := r.start(b)
	r.ok("update", c.id, "--pids-limit", "66")
	if got := c.cgroupFile("pids", "pids.max"); got != "66" {
		t.Errorf("update ID --pids-limit 66: pids.max %s", got)
	}
	r.ok("update", c.id, "--cpu-period", "900000")
	// cgroup v1: cpu.cfs_period_us; v2: the second field of cpu.max.
	if _, v1 := c.cgroups["cpu"]; v1 {
		if got := c.cgroupFile("cpu", "cpu.cfs_period_us"); got != "900000" {
			t.Errorf("update ID --cpu-period 900000: cpu.cfs_period_us %s", got)
		}
	} else if f := strings.Fields(c.cgroupFile("unified", "cpu.max")); len(f) != 2 || f[1] != "900000" {
		t.Errorf("update ID --cpu-period 900000: cpu.max %v", f)
	}
	if res := r.ok("state", c.id, "--help"); !strings.Contains(res.stdout+res.stderr, "state") {
		t.Errorf("state ID --help printed no help\n%s", res)
	}
	// events ID --stats: one stats line.
	if res := r.ok("events", c.id, "--stats"); !strings.Contains(res.stdout, `"type":"stats"`) || strings.Count(strings.TrimSpace(res.stdout), "\n") != 0 {
		t.Errorf("events ID --stats: want one stats line\n%s", res)
	}
	// kill ID SIGNAL --all, then delete ID --force on the running container.
	r.ok("kill", c.id, "0", "--all")
	r.ok("delete", c.id, "--force")
	assertNoTrace(t, r, c.id, c.pid, b.dir)

	// create ID --bundle B --pid-file P: the flags are honoured, not taken
	// for arguments.
	b2 := newBundle(t, nil, "sleep", "1000")
	c2 := r.newContainer(b2, "")
	pf := filepath.Join(tempDir(t), "create.pid")
	out, errf := c2.openStdio()
	res := r.exec(runOpts{stdout: out, stderr: errf}, "create", c2.id, "--bundle", b2.dir, "--pid-file", pf)
	out.Close()
	errf.Close()
	if res.code != 0 {
		t.Fatalf("create ID --bundle B --pid-file P\n%s\n%s", res, c2.output(c2.stderr))
	}
	st := c2.state()
	if st.Status != "created" || st.Bundle != b2.dir || readPidFile(t, pf) != st.Pid {
		t.Errorf("create ID --bundle B --pid-file P: state %+v, pid file %d", st, readPidFile(t, pf))
	}
	r.ok("delete", c2.id, "--force")
	assertNoTrace(t, r, c2.id, st.Pid, b2.dir)

	// run ID --bundle B --detach --pid-file P.
	b3 := newBundle(t, nil, "sleep", "1000")
	c3 := r.newContainer(b3, "")
	pf = filepath.Join(tempDir(t), "run.pid")
	out, errf = c3.openStdio()
	res = r.exec(runOpts{stdout: out, stderr: errf}, "run", c3.id, "--bundle", b3.dir, "--detach", "--pid-file", pf)
	out.Close()
	errf.Close()
	if res.code != 0 {
		t.Fatalf("run ID --bundle B --detach --pid-file P\n%s\n%s", res, c3.output(c3.stderr))
	}
	c3.waitStatus("running", 10*time.Second)
	st = c3.state()
	if st.Bundle != b3.dir || readPidFile(t, pf) != st.Pid {
		t.Errorf("run ID --bundle B --detach --pid-file P: state %+v, pid file %d", st, readPidFile(t, pf))
	}
	r.ok("delete", c3.id, "--force")
	assertNoTrace(t, r, c3.id, st.Pid, b3.dir)
}

// TestCLIKillSignalZero: signal 0 checks that the container's init exists.
func TestCLIKillSignalZero(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := newRT(t)
	c := r.start(newBundle(t, nil, "sleep", "1000"))
	r.ok("kill", c.id, "0")
	r.ok("kill", "-a", c.id, "0")
	r.ok("kill", c.id, "KILL")
	c.waitStatus("stopped", 10*time.Second)
	if !waitPidGone(c.pid, 5*time.Second) {
		t.Fatalf("init %d alive after KILL", c.pid)
	}
	// The init is gone: signal 0 now fails (runc: "container not running").
	if res := r.run("kill", c.id, "0"); res.code == 0 {
		t.Errorf("kill ID 0 on a stopped container succeeded\n%s", res)
	}
}

// TestCLIExecPaused: exec into a paused container is refused and starts
// nothing; --ignore-paused starts the process (frozen until resume).
func TestCLIExecPaused(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := newRT(t)
	c := r.start(newBundle(t, nil, "sleep", "1000"))
	waitExeced(t, c.pid, "sleep")
	r.ok("pause", c.id)
	marker := fmt.Sprintf("/proc/%d/root/dev/shm/paused-exec", c.pid)
	res := r.run("exec", c.id, "touch", "/dev/shm/paused-exec")
	if res.code != 255 || !strings.Contains(res.stderr, "cannot exec in a paused container") {
		t.Errorf("exec into a paused container: want exit 255 and the paused error\n%s", res)
	}
	if pids := psJSON(t, r, c.id); len(pids) != 1 {
		t.Errorf("after a refused exec the container has processes %v, want only the init", pids)
	}

	pf := filepath.Join(tempDir(t), "exec.pid")
	done := make(chan result, 1)
	go func() {
		done <- r.run("exec", "--ignore-paused", "-d", "--pid-file", pf, c.id, "sh", "-c", "touch /dev/shm/paused-exec; exec sleep 999")
	}()
	// runc's exec waits for the new process, which joins the frozen
	// cgroup: resume once the process is there.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if pids := psJSON(t, r, c.id); len(pids) > 1 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the exec'd process ran while the container was paused")
	}
	r.ok("resume", c.id)
	select {
	case res := <-done:
		if res.code != 0 {
			t.Fatalf("exec --ignore-paused\n%s", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("exec --ignore-paused did not return after resume")
	}
	pid := readPidFile(t, pf)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(marker); err == nil {
			break
		}
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("exec --ignore-paused: the process (pid %d) did not run after resume: %v", pid, err)
	}
}

// TestCLIExecSubCgroup: exec --cgroup puts the process in an existing
// sub-cgroup of the container, per controller with the v1 form; ".." and
// a missing sub-cgroup are refused with exit 255 and nothing runs.
func TestCLIExecSubCgroup(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := newRT(t)
	b := newBundle(t, nil, "sleep", "1000")
	c := r.start(b)
	// What the host shows: the v1 hierarchies the container's init has its
	// own cgroup in (per-controller directories), and its cgroup v2 one
	// ("unified": /sys/fs/cgroup on a v2 host, /sys/fs/cgroup/unified on a
	// hybrid one), if any.
	pidsDir, v1 := c.cgroups["pids"]
	v2Dir := c.cgroups["unified"]
	if v2Dir != "" && filepath.Base(v2Dir) != c.id {
		v2Dir = "" // not a cgroup of its own
	}
	if !v1 && v2Dir == "" {
		t.Skipf("skipped: the container has no cgroup of its own on this host (cgroups %v)", c.cgroups)
	}
	// "sub" in every hierarchy the container has, "only" in pids alone.
	var made []string
	seen := map[string]bool{}
	for _, d := range c.cgroups {
		// Co-mounted controllers (net_cls,net_prio) share a folder.
		if filepath.Base(d) != c.id || seen[d] {
			continue
		}
		seen[d] = true
		sub := filepath.Join(d, "sub")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		made = append(made, sub)
		// A cgroup v1 cpuset takes no task before it has cpus and mems.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(d, f)); err == nil {
				if err := os.WriteFile(filepath.Join(sub, f), v, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if v1 {
		if err := os.Mkdir(filepath.Join(pidsDir, "only"), 0o755); err != nil {
			t.Fatal(err)
		}
		made = append(made, filepath.Join(pidsDir, "only"))
	}
	t.Cleanup(func() {
		for _, d := range made {
			os.Remove(d)
		}
	})

	procs := func(dir string) []string { // pids in dir/cgroup.procs
		data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		return strings.Fields(string(data))
	}
	execIn := func(cg ...string) int {
		pf := filepath.Join(tempDir(t), "pid")
		args := []string{"exec", "-d", "--pid-file", pf}
		for _, g := range cg {
			args = append(args, "--cgroup", g)
		}
		r.ok(append(args, c.id, "sleep", "999")...)
		return readPidFile(t, pf)
	}

	if v1 {
		// cgroup v1: CONTROLLER:PATH moves the process in that hierarchy
		// only.
		pid := execIn("pids:only")
		cg := hostCgroups(pid)
		if cg["pids"] != filepath.Join(pidsDir, "only") {
			t.Errorf("exec --cgroup pids:only: pids cgroup %q, want %s", cg["pids"], filepath.Join(pidsDir, "only"))
		}
		if memDir := c.cgroups["memory"]; memDir != "" && cg["memory"] != memDir {
			t.Errorf("exec --cgroup pids:only: memory cgroup %q, want the container's %s", cg["memory"], memDir)
		}
		if p := procs(filepath.Join(pidsDir, "only")); len(p) != 1 || p[0] != strconv.Itoa(pid) {
			t.Errorf("pids/only/cgroup.procs = %v, want [%d]", p, pid)
		}
	}

	// The single-path form (the only one on cgroup v2): the same sub-path
	// in every hierarchy the container has its own cgroup in, v1 and v2.
	pid := execIn("sub")
	cg := hostCgroups(pid)
	for ctrl, d := range c.cgroups {
		if filepath.Base(d) != c.id {
			continue
		}
		if got, want := cg[ctrl], filepath.Join(d, "sub"); got != want {
			t.Errorf("exec --cgroup sub: %s cgroup %q, want %s", ctrl, got, want)
		}
	}
	if v2Dir != "" {
		if p := procs(filepath.Join(v2Dir, "sub")); len(p) != 1 || p[0] != strconv.Itoa(pid) {
			t.Errorf("cgroup v2 %s/sub/cgroup.procs = %v, want [%d]", v2Dir, p, pid)
		}
	} else {
		t.Logf("the container has no cgroup v2 directory of its own here (cgroups %v): the single-path form is checked in the v1 hierarchies", c.cgroups)
	}

	marker := fmt.Sprintf("/proc/%d/root/dev/shm/subcg", c.pid)
	before := len(psJSON(t, r, c.id))
	for _, tc := range []struct{ arg, want string }{
		{"../escape", "sub cgroup path"},
		{"missing", "no such file or directory"},
		// runc 1.1's message (runc 1.2 and later split at the first ':'
		// and fail when joining instead).
		{"a:b:c", "invalid --cgroup argument: a:b:c"},
	} {
		res := r.run("exec", "--cgroup", tc.arg, c.id, "touch", "/dev/shm/subcg")
		if res.code != 255 || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("exec --cgroup %s: want exit 255 and %q\n%s", tc.arg, tc.want, res)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("exec --cgroup %s: the process ran", tc.arg)
		}
	}
	if after := len(psJSON(t, r, c.id)); after != before {
		t.Errorf("refused execs left processes: %d before, %d after", before, after)
	}
	if v1 {
		res := r.run("exec", "--cgroup", "pids:../../escape", c.id, "touch", "/dev/shm/subcg")
		if res.code != 255 || !strings.Contains(res.stderr, "sub cgroup path") {
			t.Errorf("exec --cgroup pids:../../escape: want exit 255 and %q\n%s", "sub cgroup path", res)
		}
	}
	for _, d := range []string{filepath.Dir(pidsDir), filepath.Dir(filepath.Dir(pidsDir)), filepath.Dir(v2Dir), filepath.Dir(filepath.Dir(v2Dir))} {
		if d == "." || d == "/" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "escape")); err == nil {
			t.Errorf("a cgroup %s was created outside the container", filepath.Join(d, "escape"))
		}
	}
	r.ok("delete", "--force", c.id)
	assertNoTrace(t, r, c.id, c.pid, b.dir)
}

// TestCLIExitCodeCannotStart: exec exits 255 when its process cannot be
// started; run exits 1 (runc: "runc run failed"), and neither leaves the
// process behind.
func TestCLIExitCodeCannotStart(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := newRT(t)
	c := r.start(newBundle(t, nil, "sleep", "1000"))
	if res := r.run("exec", c.id, "/no/such/binary"); res.code != 255 {
		t.Errorf("exec of a missing binary: want exit 255\n%s", res)
	}
	if res := r.run("exec", "--pid-file", "/nonexistent-dir/x/pid", c.id, "sleep", "777"); res.code != 255 {
		t.Errorf("exec with a pid file in a missing folder: want exit 255\n%s", res)
	}
	if res := r.run("exec", "nosuch-"+c.id, "true"); res.code != 255 {
		t.Errorf("exec into a missing container: want exit 255\n%s", res)
	}
	if pids := psJSON(t, r, c.id); len(pids) != 1 {
		t.Errorf("failed execs left processes: %v", pids)
	}
	if procs := procsMentioning("777"); len(procs) > 0 {
		t.Errorf("the exec whose pid file failed is still running: %v", procs)
	}

	b := newBundle(t, nil, "/no/such/binary")
	id := uniqueID(t)
	r = newRT(t)
	res := r.run("run", "--bundle", b.dir, id)
	if res.code != 1 {
		t.Errorf("run of a missing binary: want exit 1 as runc\n%s", res)
	}
	r.run("delete", "--force", id)
	assertNoTrace(t, r, id, 0, b.dir)

	// run with a pid file in a missing folder: runc 1.1 exits 1 (not 255
	// as exec does) and removes the container it had started.
	b = newBundle(t, nil, "sleep", "778")
	id = uniqueID(t)
	res = r.run("run", "--detach", "--pid-file", "/nonexistent-dir/x/pid", "--bundle", b.dir, id)
	if res.code != 1 {
		t.Errorf("run with a pid file in a missing folder: want exit 1 as runc\n%s", res)
	}
	if procs := procsMentioning("778"); len(procs) > 0 {
		t.Errorf("the run whose pid file failed is still running: %v", procs)
	}
	r.run("delete", "--force", id)
	assertNoTrace(t, r, id, 0, b.dir)
}

// TestCLIDebugRun: run --debug forwards nsexec's debug lines to the log
// too (and a run without --debug does not).
func TestCLIDebugRun(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := newRT(t)
	for _, debug := range []bool{false, true} {
		b := newBundle(t, nil, "true")
		id := uniqueID(t)
		log := filepath.Join(tempDir(t), "run.log")
		args := []string{"--log", log, "run", "--bundle", b.dir, id}
		if debug {
			args = append([]string{"--debug"}, args...)
		}
		r.ok(args...)
		data, _ := os.ReadFile(log)
		if has := strings.Contains(string(data), "nsexec"); has != debug {
			t.Errorf("run (--debug %v): nsexec lines in the log: %v, want %v\n%s", debug, has, debug, data)
		}
		r.run("delete", "--force", id)
	}
}

// TestCLIDebugForwardsInitLogs: --debug forwards the debug lines of
// libcontainer's nsexec (the C part of the container's init) to the log.
func TestCLIDebugForwardsInitLogs(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := newRT(t)
	c := r.start(newBundle(t, nil, "sleep", "1000"))
	log := filepath.Join(tempDir(t), "debug.log")
	quiet := filepath.Join(tempDir(t), "quiet.log")
	r.ok("--log", quiet, "exec", c.id, "true")
	r.ok("--debug", "--log", log, "exec", c.id, "true")
	data, _ := os.ReadFile(log)
	if !strings.Contains(string(data), "nsexec") {
		t.Errorf("--debug log has no nsexec line:\n%s", data)
	}
	if q, _ := os.ReadFile(quiet); strings.Contains(string(q), "nsexec") {
		t.Errorf("without --debug the log has nsexec lines:\n%s", q)
	}
}
