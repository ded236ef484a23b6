//go:build integration

package tests

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillrun/skillrun/tests/internal/consolesocket"
)

func TestRunExitCode(t *testing.T) {
	needRoot(t)
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"exit0", []string{"true"}, 0},
		{"exit3", []string{"sh", "-c", "exit 3"}, 3},
		{"exit255", []string{"sh", "-c", "exit 255"}, 255},
		{"not-found", []string{"/no/such/binary"}, -2}, // any failure code
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRT(t)
			b := newBundle(t, nil, tc.args...)
			c := r.newContainer(b, "")
			res := r.run("run", "--bundle", b.dir, c.id)
			if tc.want >= 0 && res.code != tc.want {
				t.Errorf("run %v: want exit %d\n%s", tc.args, tc.want, res)
			}
			if tc.want < 0 && (res.code == 0 || res.code < 0) {
				t.Errorf("run %v: want a failure exit code\n%s", tc.args, res)
			}
			r.fails("container does not exist", "state", c.id)
			assertNoTrace(t, r, c.id, 0, b.dir)
		})
	}
}

// runInBackground starts a foreground `run` and waits for the container to
// be running; it returns a channel with the run's exit code.
func runInBackground(t *testing.T, r *rt, c *container, extra ...string) <-chan result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	t.Cleanup(cancel)
	args := append([]string{"run", "--bundle", c.b.dir}, extra...)
	cmd := r.command(ctx, append(args, c.id)...)
	out, errf := c.openStdio()
	cmd.Stdout, cmd.Stderr = out, errf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out.Close()
	errf.Close()
	done := make(chan result, 1)
	go func() {
		err := cmd.Wait()
		res := result{argv: cmd.Args, stdout: c.Stdout(), stderr: c.output(c.stderr)}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			res.code = ee.ExitCode()
		} else if err != nil {
			res.code = -1
		}
		done <- res
	}()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if res := r.run("state", c.id); res.code == 0 && strings.Contains(res.stdout, `"running"`) {
			c.setPid(c.state().Pid)
			return done
		}
		select {
		case res := <-done:
			t.Fatalf("run exited before the container was running\n%s", res)
		case <-time.After(30 * time.Millisecond):
		}
	}
	t.Fatalf("container %s never reached running", c.id)
	return nil
}

func waitResult(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case res := <-done:
		return res
	case <-time.After(20 * time.Second):
		t.Fatalf("run did not return within 20s after its container was killed")
	}
	return result{}
}

func TestRunKilled(t *testing.T) {
	needRoot(t)
	t.Parallel()
	for _, sig := range []string{"KILL", "9", "SIGKILL"} {
		t.Run(sig, func(t *testing.T) {
			t.Parallel()
			r := newRT(t)
			c := r.newContainer(newBundle(t, nil, "sleep", "1000"), "")
			done := runInBackground(t, r, c)
			r.ok("kill", c.id, sig)
			res := waitResult(t, done)
			if res.code != 137 {
				t.Errorf("run killed by SIGKILL: want exit 137 (128+9)\n%s", res)
			}
			assertNoTrace(t, r, c.id, c.pid, c.b.dir)
		})
	}
	t.Run("TERM-handled", func(t *testing.T) {
		t.Parallel()
		r := newRT(t)
		c := r.newContainer(newBundle(t, nil, "sh", "-c", `trap 'exit 42' TERM; echo ready; while :; do sleep 1000 & wait; done`), "")
		done := runInBackground(t, r, c)
		c.waitStdout("ready", 10*time.Second)
		r.ok("kill", c.id, "TERM")
		if res := waitResult(t, done); res.code != 42 {
			t.Errorf("run whose init exits 42 on TERM: want 42\n%s", res)
		}
	})
}

func TestRunDetach(t *testing.T) {
	needRoot(t)
	t.Parallel()
	for _, flag := range []string{"--detach", "-d"} {
		t.Run(flag, func(t *testing.T) {
			t.Parallel()
			r := newRT(t)
			b := newBundle(t, nil, "sleep", "1000")
			c := r.newContainer(b, "")
			out, errf := c.openStdio()
			res := r.exec(runOpts{stdout: out, stderr: errf, timeout: 15 * time.Second}, "run", flag, "--bundle", b.dir, c.id)
			out.Close()
			errf.Close()
			if res.code != 0 {
				t.Fatalf("run %s\n%s", flag, res)
			}
			st := c.state()
			c.setPid(st.Pid)
			if st.Status != "running" || !pidAlive(st.Pid) {
				t.Fatalf("after run %s: %+v alive=%v", flag, st, pidAlive(st.Pid))
			}
			r.ok("kill", c.id, "KILL")
			c.waitStatus("stopped", 10*time.Second)
			r.ok("delete", c.id)
			assertNoTrace(t, r, c.id, c.pid, b.dir)
		})
	}
}

func TestRunKeep(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := newRT(t)
	b := newBundle(t, nil, "sh", "-c", "exit 4")
	c := r.newContainer(b, "")
	if res := r.run("run", "--keep", "--bundle", b.dir, c.id); res.code != 4 {
		t.Fatalf("run --keep: want exit 4\n%s", res)
	}
	st := c.state()
	if st.Status != "stopped" {
		t.Errorf("after run --keep: status %q, want stopped", st.Status)
	}
	if _, err := os.Stat(filepath.Join(r.root, c.id)); err != nil {
		t.Errorf("after run --keep the state dir is gone: %v", err)
	}
	r.ok("delete", c.id)
	assertNoTrace(t, r, c.id, 0, b.dir)
}

func TestRunStdio(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := newRT(t)
	b := newBundle(t, nil, "sh", "-c", "cat; echo to-stderr >&2")
	id := uniqueID(t)
	r.newContainer(b, id)
	res := r.exec(runOpts{stdin: strings.NewReader("line one\nline two\n")}, "run", "--bundle", b.dir, id)
	if res.code != 0 || res.stdout != "line one\nline two\n" || res.stderr != "to-stderr\n" {
		t.Errorf("run stdio passthrough: want stdout %q and stderr %q\n%s", "line one\nline two\n", "to-stderr\n", res)
	}
}

func TestRunBundleFromCwd(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := newRT(t)
	b := newBundle(t, nil, "sh", "-c", "echo from-cwd")
	id := uniqueID(t)
	r.newContainer(b, id)
	res := r.exec(runOpts{dir: b.dir}, "run", id)
	if res.code != 0 || res.stdout != "from-cwd\n" {
		t.Errorf("run with the bundle in the working directory\n%s", res)
	}
}

// TestRunBundleDirArgument: skillrun's `run DIR` where DIR holds config.json
// takes DIR as the bundle and generates the ID.
func TestRunBundleDirArgument(t *testing.T) {
	needRoot(t)
	t.Parallel()
	if !info().skillrun {
		t.Skipf("skillrun-only: %s takes the argument of run as the container ID", runtimeName)
	}
	r := newRT(t)
	b := newBundle(t, nil, "sh", "-c", "echo bundle-arg; exit 6")
	res := r.exec(runOpts{dir: "/"}, "run", b.dir)
	if res.code != 6 || res.stdout != "bundle-arg\n" {
		t.Errorf("run BUNDLE_DIR\n%s", res)
	}
	if out := r.ok("list", "-q"); out.stdout != "" {
		t.Errorf("container left after run BUNDLE_DIR\n%s", out)
	}
}

func TestRunTTYConsoleSocket(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := newRT(t)
	testTTY(t, r, nil)
}

// testTTY runs a terminal container detached with --console-socket, receives
// the pty master and talks to the container through it.
func testTTY(t *testing.T, r *rt, u *testUser) {
	t.Helper()
	b := newBundle(t, u, "sh", "-c", `if [ -t 0 ] && [ -t 1 ]; then echo "TTY-OK $(tty)"; fi; read line; echo "got:$line"; exit 0`)
	b.spec.Process.Terminal = true
	b.save()
	sock := filepath.Join(tempDir(t), "console.sock")
	l, err := consolesocket.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := r.newContainer(b, "")
	type recv struct {
		f    *os.File
		name string
		err  error
	}
	got := make(chan recv, 1)
	go func() {
		f, name, err := l.Receive(15 * time.Second)
		got <- recv{f, name, err}
	}()
	res := r.exec(runOpts{timeout: 20 * time.Second}, "run", "--detach", "--console-socket", sock, "--bundle", b.dir, c.id)
	if res.code != 0 {
		t.Fatalf("run --detach --console-socket\n%s", res)
	}
	if res.stdout != "" {
		t.Errorf("run with a tty printed to its own stdout\n%s", res)
	}
	rc := <-got
	if rc.err != nil {
		t.Fatalf("console socket: %v", rc.err)
	}
	master := rc.f
	defer master.Close()
	if st := c.state(); st.Pid > 0 {
		c.setPid(st.Pid)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(master)
		for sc.Scan() {
			lines <- strings.TrimRight(sc.Text(), "\r")
		}
		close(lines)
	}()
	expectLine := func(prefix string) string {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("pty closed before a line starting %q", prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return l
				}
			case <-timeout:
				t.Fatalf("no line starting %q from the pty", prefix)
			}
		}
	}
	l1 := expectLine("TTY-OK")
	if !strings.Contains(l1, "/dev/pts/") {
		t.Errorf("tty in the container = %q, want /dev/pts/N", l1)
	}
	if _, err := master.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	expectLine("got:ping")
	c.waitStatus("stopped", 10*time.Second)
	r.ok("delete", c.id)
	assertNoTrace(t, r, c.id, c.pid, b.dir)
}

// TestExeSealBelowBinary: a state root inside the binary's folder, where
// libcontainer cannot protect the binary with a read-only overlay and
// copies all of it into a sealed memfd for every container, is said on
// stderr (with the fix); a state root elsewhere is not.
func TestExeSealBelowBinary(t *testing.T) {
	needRoot(t)
	if runtimeName != "skillrun" {
		t.Skipf("skipped: the warning is skillrun's (runtime %s)", runtimeName)
	}
	dir := tempDir(t)
	bin := copyRuntime(t, dir)
	b := newBundle(t, nil, "true")
	for _, c := range []struct {
		root string
		warn bool
	}{{filepath.Join(dir, "state"), true}, {filepath.Join(tempDir(t), "state"), false}} {
		out, err := exec.Command(bin, "--root", c.root, "run", "--bundle", b.dir, uniqueID(t)).CombinedOutput()
		if err != nil {
			t.Fatalf("run with --root %s: %v\n%s", c.root, err, out)
		}
		if got := strings.Contains(string(out), "sealed memfd"); got != c.warn {
			t.Errorf("--root %s: warned %v, want %v\n%s", c.root, got, c.warn, out)
		}
	}
}
