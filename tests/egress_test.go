//go:build integration

package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/tests/internal/hostcheck"
)

// TestEgressAnnotation: a plain OCI bundle asks for skillrun's network
// allowlist through annotations; `run`, and `create` + `start`, serve it
// with a detached helper that lives as long as the container's init. The
// loopback server's log is the verdict: the allowed name reached it, the
// other name and the IP literal did not.
// It runs as root and as the unprivileged test user (whose bundle comes
// from `spec --rootless`, given a network namespace of its own).
func TestEgressAnnotation(t *testing.T) {
	needRoot(t)
	if !info().skillrun {
		t.Skipf("skipped: the network allowlist annotations are skillrun's (runtime %s)", runtimeName)
	}
	t.Parallel()
	t.Run("root", func(t *testing.T) {
		t.Parallel()
		egressAnnotation(t, nil)
	})
	t.Run("rootless", func(t *testing.T) {
		t.Parallel()
		egressAnnotation(t, needTestUser(t))
	})
}

func egressAnnotation(t *testing.T, u *testUser) {
	start := time.Now().Add(-time.Second)
	o := hostcheck.StartOrigin(t)
	// The host's python3 (its /usr bound read-only): busybox's static
	// wget cannot resolve names. Through the allowlist's proxy, through
	// its DNS and synthetic address, and an IP literal directly.
	script := fmt.Sprintf(`import urllib.request
def get(url, proxy):
    h = urllib.request.ProxyHandler({"http": proxy} if proxy else {})
    try:
        return urllib.request.build_opener(h).open(url, timeout=5).read().decode().strip()
    except Exception as e:
        return "failed %%s: %%s" %% (url, e)
P = "http://127.0.0.1:3128"
for url, proxy in [("http://api.test:%[1]d/allowed", P), ("http://api.test:%[1]d/direct", None),
                   ("http://other.test:%[1]d/other", P), ("http://other.test:%[1]d/other-direct", None),
                   ("http://127.0.0.1:%[1]d/literal", None)]:
    print(get(url, proxy))
`, o.Port)
	newAllowBundle := func(args ...string) *bundle {
		if len(args) == 0 {
			args = []string{"/usr/bin/python3", "-c", script}
		}
		b := newBundle(t, u, args...)
		if !slices.ContainsFunc(b.spec.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.NetworkNamespace }) {
			// spec --rootless shares the host's network; the allowlist
			// needs a namespace of its own.
			b.spec.Linux.Namespaces = append(b.spec.Linux.Namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace})
		}
		b.spec.Mounts = append(b.spec.Mounts, specs.Mount{Destination: "/usr", Type: "bind", Source: "/usr", Options: []string{"rbind", "ro", "nosuid", "nodev"}})
		os.MkdirAll(filepath.Join(b.rootfs(), "usr"), 0o755)
		for _, l := range []string{"lib", "lib64"} {
			if target, err := os.Readlink("/" + l); err == nil {
				os.Symlink(target, filepath.Join(b.rootfs(), l))
			}
		}
		if b.spec.Annotations == nil {
			b.spec.Annotations = map[string]string{}
		}
		b.spec.Annotations["run.skillrun.network.allow"] = fmt.Sprintf("api.test:%d", o.Port)
		b.spec.Annotations["run.skillrun.network.resolve"] = fmt.Sprintf("api.test:%d:127.0.0.1", o.Port)
		b.save()
		// The sandbox's resolver is the allowlist's DNS.
		if err := os.WriteFile(filepath.Join(b.rootfs(), "etc", "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return b
	}
	check := func(t *testing.T, out string, wantAllowed int) {
		t.Helper()
		for _, want := range []string{"hello from /allowed", "hello from /direct", "failed http://other.test:" + fmt.Sprint(o.Port) + "/other:", "failed http://other.test:" + fmt.Sprint(o.Port) + "/other-direct", "failed http://127.0.0.1"} {
			if !strings.Contains(out, want) {
				t.Errorf("container output lacks %q:\n%s", want, out)
			}
		}
		n := 0
		for _, l := range o.Seen() {
			if l != fmt.Sprintf("/allowed host=api.test:%d", o.Port) && l != fmt.Sprintf("/direct host=api.test:%d", o.Port) {
				t.Errorf("LEAK: the loopback server served %q", l)
			} else {
				n++
			}
		}
		if n != wantAllowed {
			t.Errorf("the loopback server served the allowed paths %d times, want %d", n, wantAllowed)
		}
	}
	// This test's helpers: their arguments name the origin's port.
	allow := fmt.Sprintf("api.test:%d", o.Port)
	helpers := func() []string { return procsMentioning(allow) }
	waitNoHelper := func(t *testing.T) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for len(helpers()) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}

	r := newRT(t)
	if u != nil {
		r = newRootlessRT(t)
	}
	t.Run("run", func(t *testing.T) {
		b := newAllowBundle()
		id := uniqueID(t)
		res := r.run("run", "--bundle", b.dir, id)
		if res.code != 0 {
			t.Fatalf("run\n%s", res)
		}
		check(t, res.stdout, 2)
		assertNoTrace(t, r, id, 0, b.dir)
	})
	t.Run("create-start", func(t *testing.T) {
		b := newAllowBundle()
		c := r.create(b)
		r.ok("start", c.id)
		c.waitStatus("stopped", 30*time.Second)
		check(t, c.Stdout(), 4)
		r.ok("delete", c.id)
		assertNoTrace(t, r, c.id, c.pid, b.dir)
	})
	t.Run("helper-killed", func(t *testing.T) {
		// The helper SIGKILLed while its container runs (two processes:
		// the init and a child it forked): within a second, both are
		// gone, judged by pid and start time from the host; the state
		// says stopped and delete leaves nothing: no state, process,
		// mount, holder of the container's network namespace (process,
		// descriptor, nsfs mount), cgroup of its own (as the test user:
		// the delegated one, when it had one) or guard.
		marker := "helper-killed-" + uniqueID(t)
		b := newAllowBundle("/usr/bin/python3", "-c", "import os, time\nif os.fork() == 0: time.sleep(600)\ntime.sleep(600)", marker)
		c := r.create(b)
		r.ok("start", c.id)
		var procs []hostcheck.Proc
		deadline := time.Now().Add(10 * time.Second)
		for len(procs) < 2 && time.Now().Before(deadline) {
			procs = hostcheck.Procs(func(args []string) bool { return slices.Contains(args, marker) })
			time.Sleep(10 * time.Millisecond)
		}
		if len(procs) != 2 {
			t.Fatalf("control: want the container's 2 processes on the host, found %v", procs)
		}
		// What the container holds, seen from the host before the kill:
		// its network namespace (its own: the bundle asks for one) and
		// the cgroups of its init that are not this test's own.
		netns := hostcheck.Netns(c.pid)
		if netns == "" || netns == hostcheck.Netns(os.Getpid()) {
			t.Fatalf("control: the container's init %d has no network namespace of its own (%q)", c.pid, netns)
		}
		// Holders are the processes naming the marker or the container
		// (its egress helper): another suite's sandbox may be given the
		// namespace's number once it is freed.
		held := func() []string { return hostcheck.NetnsHolders(map[string]bool{netns: true}, marker, c.id) }
		if len(held()) == 0 {
			t.Fatalf("control: nothing holds the container's network namespace %s", netns)
		}
		cgroups := hostCgroups(c.pid)
		if u == nil && len(cgroups) == 0 {
			t.Fatalf("control: the container's init %d has no cgroup of its own", c.pid)
		}
		t.Logf("the container's network namespace %s, cgroups of its own %v", netns, cgroups)
		var ids []hostcheck.ProcID
		for _, p := range procs {
			if id, ok := hostcheck.ProcIDOf(p.Pid); ok {
				ids = append(ids, id)
			}
		}
		helper := hostcheck.Procs(func(args []string) bool {
			return len(args) > 2 && args[1] == "__skillrun-egress-helper" && slices.Contains(args, c.id)
		})
		if len(helper) != 1 {
			t.Fatalf("want the container's one egress helper, found %v", helper)
		}
		if err := syscall.Kill(helper[0].Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		var left []hostcheck.ProcID
		for {
			left = left[:0]
			for _, id := range ids {
				if id.Alive() {
					left = append(left, id)
				}
			}
			if len(left) == 0 || time.Since(killed) > 5*time.Second {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		took := time.Since(killed)
		if len(left) > 0 {
			t.Fatalf("the container's processes %v still run %s after its egress helper was SIGKILLed", left, took)
		}
		t.Logf("the container's processes were gone %s after its egress helper's SIGKILL", took.Round(time.Millisecond))
		if took > time.Second {
			t.Errorf("the container's processes took %s to go after its egress helper's SIGKILL, want within 1s", took)
		}
		c.waitStatus("stopped", 5*time.Second)
		r.ok("delete", c.id)
		assertNoTrace(t, r, c.id, c.pid, b.dir)
		if !waitFor(2*time.Second, func() bool { return len(held()) == 0 }) {
			t.Errorf("the container's network namespace %s is still held: %v", netns, held())
		}
		for ctrl, d := range cgroups {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Errorf("the container's %s cgroup %s is left behind (%v)", ctrl, d, err)
			}
		}
		// The helper's guard (kept mode), reparented to this test (the
		// subreaper) by the helper's death, ends once it has killed.
		if !waitFor(2*time.Second, func() bool { return len(orphanGuards()) == 0 }) {
			t.Errorf("lifetime guards still running after their egress helper's SIGKILL: %v", orphanGuards())
		}
	})
	t.Run("bad-allowlist", func(t *testing.T) {
		b := newAllowBundle()
		b.spec.Annotations["run.skillrun.network.allow"] = "api.test:notaport"
		b.save()
		id := uniqueID(t)
		res := r.run("create", "--bundle", b.dir, id)
		if res.code == 0 {
			r.run("delete", "--force", id)
		}
		if res.code != 1 || !strings.Contains(res.stderr, "run.skillrun.network.allow") {
			t.Errorf("a bad allowlist: want exit 1 naming the annotation\n%s", res)
		}
		assertNoTrace(t, r, id, 0, b.dir)
	})
	waitNoHelper(t)
	if h := helpers(); len(h) > 0 {
		t.Errorf("egress helpers outlived their containers: %v", h)
	}
	// Handoff folders go once the hook has connected; other runs on this
	// machine may hold one for a moment: only those made since start
	// that stay count.
	newFolders := func() []string {
		var left []string
		m, _ := filepath.Glob(filepath.Join(os.TempDir(), "skillrun-egress-*"))
		for _, f := range m {
			if fi, err := os.Stat(f); err == nil && !fi.ModTime().Before(start) {
				left = append(left, f)
			}
		}
		return left
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(newFolders()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := newFolders(); len(left) > 0 {
		t.Errorf("handoff folders left behind: %v", left)
	}
}

// orphanGuards lists the live lifetime guards whose parent is this test
// process (the subreaper): guards whose own runner died.
func orphanGuards() []hostcheck.Proc {
	var out []hostcheck.Proc
	for _, p := range hostcheck.Procs(func(args []string) bool { return len(args) == 2 && args[1] == "__skillrun-guard" }) {
		if _, ppid, _, ok := hostcheck.ProcStat(p.Pid); ok && ppid == os.Getpid() {
			out = append(out, p)
		}
	}
	return out
}

// waitFor polls cond every 10 ms for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
