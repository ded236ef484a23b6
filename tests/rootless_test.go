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

// procUIDs returns the real and effective uid of pid on the host.
func procUIDs(t *testing.T, pid int) (real, eff int) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("status of pid %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "Uid:" {
			real, _ = strconv.Atoi(f[1])
			eff, _ = strconv.Atoi(f[2])
			return
		}
	}
	t.Fatalf("no Uid line for pid %d", pid)
	return
}

func TestRootlessSpec(t *testing.T) {
	u := needTestUser(t)
	t.Parallel()
	// specTemplate ran `spec --rootless` as the user
	checkRootlessSpec(t, specTemplate(t, u), u.uid, u.gid)
}

func TestRootlessLifecycle(t *testing.T) {
	u := needTestUser(t)
	t.Parallel()
	r := newRootlessRT(t)
	b := newBundle(t, u, waiter...)
	c := r.newContainer(b, "")
	pidFile := filepath.Join(b.dir, "init.pid")
	if res := c.createRaw(runOpts{}, "--pid-file", pidFile); res.code != 0 {
		t.Fatalf("rootless create\n%s", res)
	}
	st := c.state()
	c.setPid(st.Pid)
	if st.Status != "created" || st.Bundle != b.dir {
		t.Errorf("state %+v", st)
	}
	if pid := readPidFile(t, pidFile); pid != st.Pid {
		t.Errorf("pid file %d, state pid %d", pid, st.Pid)
	}
	if real, eff := procUIDs(t, st.Pid); real != u.uid || eff != u.uid {
		t.Errorf("rootless init %d runs as host uid %d/%d, want %d (%s)", st.Pid, real, eff, u.uid, u.name)
	}
	if nsLink(t, st.Pid, "user") == nsLink(t, os.Getpid(), "user") {
		t.Errorf("rootless init %d is not in a user namespace", st.Pid)
	}
	if fi, err := os.Stat(filepath.Join(r.root, c.id)); err != nil {
		t.Errorf("state dir: %v", err)
	} else if uid := fileUID(fi); uid != u.uid {
		t.Errorf("state dir owned by uid %d, want %d", uid, u.uid)
	}
	r.ok("start", c.id)
	c.waitStdout("ready", 10*time.Second)
	c.waitStatus("running", 5*time.Second)

	res := r.ok("list")
	if !strings.Contains(res.stdout, c.id) || !strings.Contains(res.stdout, u.name) {
		t.Errorf("rootless list lacks the container or owner %s\n%s", u.name, res)
	}
	// ps lists the cgroup's pids; rootless on cgroup v1 there is no
	// container cgroup (runc fails the same way), so only require it then.
	if ownCgroup(c.pid) {
		if pids := psJSON(t, r, c.id); !containsInt(pids, c.pid) {
			t.Errorf("ps --format json = %v, lacks %d", pids, c.pid)
		}
	} else if res := r.run("ps", "--format", "json", c.id); res.code != 0 {
		t.Logf("rootless ps without a container cgroup fails (allowed):\n%s", res)
	}

	// exec: in-container root, host uid of the user; status propagation
	if res := r.ok("exec", c.id, "id", "-u"); res.stdout != "0\n" {
		t.Errorf("rootless exec id -u\n%s", res)
	}
	if res := r.run("exec", c.id, "sh", "-c", "exit 9"); res.code != 9 {
		t.Errorf("rootless exec exit 9\n%s", res)
	}
	if res := r.ok("exec", "--env", "A=b", "--cwd", "/etc", c.id, "sh", "-c", `echo "$A $(pwd)"`); res.stdout != "b /etc\n" {
		t.Errorf("rootless exec --env --cwd\n%s", res)
	}
	pf := filepath.Join(b.dir, "exec.pid")
	if res := r.run("exec", "--detach", "--pid-file", pf, c.id, "sleep", "999"); res.code != 0 {
		t.Fatalf("rootless exec --detach\n%s", res)
	}
	epid := readPidFile(t, pf)
	if real, _ := procUIDs(t, epid); real != u.uid {
		t.Errorf("rootless exec pid %d runs as host uid %d, want %d", epid, real, u.uid)
	}

	r.fails("", "delete", c.id) // running
	r.ok("kill", c.id, "USR1")
	c.waitStdout("got-USR1", 10*time.Second)
	r.ok("kill", c.id, "15")
	c.waitStdout("got-TERM", 10*time.Second)
	c.waitStatus("stopped", 10*time.Second)
	if !waitPidGone(epid, 5*time.Second) {
		t.Errorf("exec'd pid %d survived its container's init", epid)
	}
	r.ok("delete", c.id)
	r.fails("container does not exist", "state", c.id)
	assertNoTrace(t, r, c.id, c.pid, b.dir)
}

func TestRootlessRun(t *testing.T) {
	u := needTestUser(t)
	t.Parallel()
	t.Run("exit3", func(t *testing.T) {
		t.Parallel()
		r := newRootlessRT(t)
		b := newBundle(t, u, "sh", "-c", "echo out; exit 3")
		c := r.newContainer(b, "")
		res := r.run("run", "--bundle", b.dir, c.id)
		if res.code != 3 || res.stdout != "out\n" {
			t.Errorf("rootless run: want exit 3 and stdout out\n%s", res)
		}
		assertNoTrace(t, r, c.id, 0, b.dir)
	})
	t.Run("killed", func(t *testing.T) {
		t.Parallel()
		r := newRootlessRT(t)
		c := r.newContainer(newBundle(t, u, "sleep", "1000"), "")
		done := runInBackground(t, r, c)
		r.ok("kill", c.id, "KILL")
		if res := waitResult(t, done); res.code != 137 {
			t.Errorf("rootless run killed by SIGKILL: want 137\n%s", res)
		}
		assertNoTrace(t, r, c.id, c.pid, c.b.dir)
	})
	t.Run("force-delete", func(t *testing.T) {
		t.Parallel()
		r := newRootlessRT(t)
		c := r.start(newBundle(t, u, "sleep", "1000"))
		r.ok("delete", "--force", c.id)
		assertNoTrace(t, r, c.id, c.pid, c.b.dir)
	})
	t.Run("tty", func(t *testing.T) {
		t.Parallel()
		testTTY(t, newRootlessRT(t), u)
	})
}

func TestRootlessErrors(t *testing.T) {
	u := needTestUser(t)
	t.Parallel()
	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		testMissingContainer(t, func(t *testing.T) *rt { return newRootlessRT(t) })
	})
	t.Run("bad-ids", func(t *testing.T) {
		t.Parallel()
		testBadIDs(t, func(t *testing.T) *rt { return newRootlessRT(t) }, u)
	})
	t.Run("bad-config", func(t *testing.T) {
		t.Parallel()
		testBadConfig(t, func(t *testing.T) *rt { return newRootlessRT(t) }, u)
	})
	t.Run("duplicate", func(t *testing.T) {
		t.Parallel()
		r := newRootlessRT(t)
		b := newBundle(t, u, "sleep", "1000")
		c := r.create(b)
		r.fails("container with given ID already exists", "create", "--bundle", b.dir, c.id)
		if st := c.state(); st.Status != "created" || st.Pid != c.pid || !pidAlive(c.pid) {
			t.Errorf("duplicate create disturbed the container: %+v", st)
		}
	})
	t.Run("other-users-root", func(t *testing.T) {
		t.Parallel()
		// the user cannot read or delete root's containers
		rr := newRT(t)
		c := rr.create(newBundle(t, nil, "sleep", "1000"))
		os.Chmod(filepath.Dir(rr.root), 0o755)
		ru := &rt{t: t, root: rr.root, user: u}
		for _, args := range [][]string{{"delete", "--force", c.id}, {"kill", c.id, "KILL"}} {
			if res := ru.run(args...); res.code == 0 {
				t.Errorf("unprivileged %v on root's container succeeded\n%s", args, res)
			}
		}
		if st := c.state(); st.Status != "created" || !pidAlive(c.pid) {
			t.Errorf("root's container changed by the user: %+v", st)
		}
	})
}

// TestRootlessDefaultRoot: without --root an unprivileged runtime keeps its
// state under $XDG_RUNTIME_DIR.
func TestRootlessDefaultRoot(t *testing.T) {
	u := needTestUser(t)
	t.Parallel()
	r := &rt{t: t, user: u}
	b := newBundle(t, u, "sleep", "1000")
	c := r.newContainer(b, "")
	if res := c.createRaw(runOpts{}); res.code != 0 {
		t.Fatalf("rootless create without --root\n%s", res)
	}
	st := c.state()
	c.setPid(st.Pid)
	dir := filepath.Join(u.xdg, info().xdgSubdir, c.id)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("%s rootless without --root: state dir %s missing: %v", runtimeName, dir, err)
	}
	r.ok("delete", "--force", c.id)
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("state dir %s survived delete", dir)
	}
	assertNoTrace(t, r, c.id, c.pid, b.dir)
}

// ownCgroup says whether pid has a pids cgroup other than ours.
func ownCgroup(pid int) bool {
	_, ok := hostCgroups(pid)["pids"]
	return ok
}
