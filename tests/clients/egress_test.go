//go:build integration

package clients_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillrun/skillrun/tests/internal/hostcheck"
)

// The network allowlist asked for through annotations by real clients:
// containerd (ctr) and podman create the container, skillrun's create
// starts the detached egress helper. The verdict is a loopback origin's
// own log: the allowed name reached it through the sandbox's proxy, the
// other name and the IP literal did not.

// egressOrigin is the loopback origin the sandboxes are allowed to reach.
type egressOrigin struct{ *hostcheck.Origin }

func startEgressOrigin(t *testing.T) *egressOrigin { return &egressOrigin{hostcheck.StartOrigin(t)} }

// egressAnnotations asks for api.test on the origin's port, mapped to
// this host's loopback (the only way to reach a loopback address).
func (o *egressOrigin) annotations() []string {
	return []string{
		"--annotation", fmt.Sprintf("run.skillrun.network.allow=api.test:%d", o.Port),
		"--annotation", fmt.Sprintf("run.skillrun.network.resolve=api.test:%d:127.0.0.1", o.Port),
	}
}

// script is what the busybox container runs (busybox's static wget
// crashes in glibc's resolver; nc with addresses and nslookup do not):
// through the proxy the allowed name and another one, the origin's
// address directly, then through the sandbox's DNS the allowed name's
// synthetic address with the right Host and with another.
func (o *egressOrigin) script() string {
	return fmt.Sprintf(`get() { printf 'GET %%s HTTP/1.0\r\nHost: %%s\r\n\r\n' "$3" "$4" | nc -w 5 "$1" "$2"; echo " rc=$?"; }
get 127.0.0.1 3128 http://api.test:%[1]d/allowed api.test:%[1]d
get 127.0.0.1 3128 http://other.test:%[1]d/other other.test:%[1]d
get 127.0.0.1 %[1]d /literal 127.0.0.1:%[1]d
A=$(nslookup api.test 127.0.0.1 | sed -n 's/^Address: *\(198\.[0-9.]*\).*/\1/p' | head -n 1)
echo "api.test is $A"
get "$A" %[1]d /direct api.test:%[1]d
get "$A" %[1]d /smuggled evil.test
exit 0`, o.Port)
}

// check judges a container's run by the origin's log (and, for the
// record, by what the container printed).
func (o *egressOrigin) check(t *testing.T, out string) {
	t.Helper()
	t.Logf("container output (not evidence):\n%s", out)
	want := []string{fmt.Sprintf("/allowed host=api.test:%d", o.Port), fmt.Sprintf("/direct host=api.test:%d", o.Port)}
	if got := o.Seen(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the loopback origin served %q, want exactly %q (the other name, the IP literal and the other Host must not reach it)\ncontainer output:\n%s", got, want, out)
	}
	if !strings.Contains(out, "hello from /allowed") || !strings.Contains(out, "hello from /direct") {
		t.Errorf("the container did not get the allowed answers:\n%s", out)
	}
}

// assertNoEgressHelper checks that no egress helper of the origin's port
// and no handoff folder made since start outlive the container.
func assertNoEgressHelper(t *testing.T, o *egressOrigin, start time.Time) {
	t.Helper()
	mark := fmt.Sprintf("api.test:%d", o.Port)
	helpers := func() []int {
		var out []int
		for _, p := range procsWithCmdline("__skillrun-egress-helper") {
			if strings.Contains(cmdlineOf(p), mark) {
				out = append(out, p)
			}
		}
		return out
	}
	if !waitFor(10*time.Second, func() bool { return len(helpers()) == 0 }) {
		for _, p := range helpers() {
			t.Errorf("egress helper outlived its container: pid %d %s", p, cmdlineOf(p))
		}
	}
	// Handoff folders are removed once the hook has connected; another
	// run on this machine may hold one for a moment, so only folders made
	// since start that stay count.
	newFolders := func() []string {
		var left []string
		for _, dir := range []string{os.TempDir(), "/tmp"} {
			m, _ := filepath.Glob(filepath.Join(dir, "skillrun-egress-*"))
			for _, f := range m {
				if fi, err := os.Stat(f); err == nil && !fi.ModTime().Before(start) {
					left = append(left, f)
				}
			}
		}
		return left
	}
	if !waitFor(5*time.Second, func() bool { return len(newFolders()) == 0 }) {
		t.Errorf("handoff folders left behind: %v", newFolders())
	}
}

func requireSkillrun(t *testing.T) {
	t.Helper()
	if n := filepath.Base(runtimeUnderTest(t)); n != "skillrun" {
		t.Skipf("SKIP: the network allowlist annotations are skillrun's (runtime %s)", n)
	}
}

// TestContainerdEgressAnnotation: `ctr run` with the allowlist annotations
// (containerd's runc shim v2 calls create, start, delete).
func TestContainerdEgressAnnotation(t *testing.T) {
	requireRoot(t)
	requireSkillrun(t)
	c := startContainerd(t, daemonOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := startEgressOrigin(t)
	start := time.Now().Add(-time.Second)
	id := "egress-" + randomSuffix()
	r := c.ctr(ctx, 0, append(c.runArgs(append([]string{"--rm"}, o.annotations()...)...), id, "sh", "-c", o.script())...)
	o.check(t, r.stdout+r.stderr)
	if !strings.Contains(c.argvCalls(), " create ") {
		t.Errorf("the shim did not call the runtime under test's create; calls:\n%s", c.argvCalls())
	}
	c.assertGone(ctx, id, 0)
	assertNoEgressHelper(t, o, start)
}

func podmanEgress(t *testing.T, rootless bool) {
	requireSkillrun(t)
	p := newPodman(t, rootless)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := startEgressOrigin(t)
	start := time.Now().Add(-time.Second)
	cf := filepath.Join(p.work, "egress.cid")
	r := p.must(ctx, 0, append(p.runArgs(append([]string{"--rm", "--cidfile", cf}, o.annotations()...)...), "sh", "-c", o.script())...)
	o.check(t, r.stdout+r.stderr)
	b, _ := os.ReadFile(cf)
	p.assertGone(ctx, strings.TrimSpace(string(b)), 0)
	assertNoEgressHelper(t, o, start)
}

// TestPodmanEgressAnnotation: `podman run --network none` with the
// allowlist annotations, as root and as the unprivileged test user.
func TestPodmanEgressAnnotation(t *testing.T) {
	t.Run("root", func(t *testing.T) { podmanEgress(t, false) })
	t.Run("rootless", func(t *testing.T) { podmanEgress(t, true) })
}
