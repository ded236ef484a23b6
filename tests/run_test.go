//go:build integration

package tests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// forwardScript traps the signals forwardedSignals sends, echoing each,
// and exits 7 on SIGTERM: the container's side of a forwarding test. It
// waits in short foreground sleeps (the shell runs a trap once the one
// under way ends), so no process of its own is left when it exits.
const forwardScript = `for s in USR1 USR2 HUP INT QUIT ALRM PWR CONT TSTP TTIN TTOU 35 40 64; do trap "echo got-$s" $s; done
trap 'echo got-TERM; exit 7' TERM
echo ready
while :; do sleep 0.05; done`

// forwardedSignals sends signals to the runtime process pid (a
// foreground run or exec) and waits for the container's process
// (forwardScript) to report each, then ends it with SIGTERM. They cover
// both kinds the C relay of skillrun takes (internal/sigfwd): those the
// Go runtime catches from the start, and those it leaves at their
// default (SIGCONT, SIGTSTP, SIGTTIN, SIGTTOU; a runtime that did not
// catch the last three would be stopped by them).
func forwardedSignals(t *testing.T, pid int, stdout func() string) {
	t.Helper()
	wait := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(stdout(), what+"\n") {
			if time.Now().After(deadline) {
				t.Fatalf("the container's process never said %q; its stdout: %q", what, stdout())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("ready")
	for _, s := range []struct {
		name string
		sig  syscall.Signal
	}{
		{"USR1", syscall.SIGUSR1}, {"USR2", syscall.SIGUSR2}, {"ALRM", syscall.SIGALRM},
		{"PWR", syscall.SIGPWR}, {"35", 35}, {"40", 40}, {"64", 64},
		{"HUP", syscall.SIGHUP}, {"INT", syscall.SIGINT}, {"QUIT", syscall.SIGQUIT},
		{"CONT", syscall.SIGCONT}, {"TSTP", syscall.SIGTSTP}, {"TTIN", syscall.SIGTTIN},
		{"TTOU", syscall.SIGTTOU}, {"TERM", syscall.SIGTERM},
	} {
		if err := syscall.Kill(pid, s.sig); err != nil {
			t.Fatalf("kill -%s %d (the runtime): %v", s.name, pid, err)
		}
		wait("got-" + s.name)
	}
}

// parentPid reads pid's parent from /proc.
func parentPid(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ppid ...: comm may hold spaces; the last ')' ends it.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	return ppid
}

// TestRunForwardsSignals: signals sent to a foreground `run` or `exec`
// reach the container's process (it traps them and says so), the
// runtime stays until the process ends, and exits with its status.
// Root and rootless.
func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"root", "rootless"} {
		t.Run(mode+"/run", func(t *testing.T) {
			t.Parallel()
			r, u := forwardRT(t, mode)
			c := r.newContainer(newBundle(t, u, "sh", "-c", forwardScript), "")
			done := runInBackground(t, r, c)
			rtPid := parentPid(t, c.pid)
			forwardedSignals(t, rtPid, c.Stdout)
			if res := waitResult(t, done); res.code != 7 {
				t.Errorf("run whose process exits 7 on SIGTERM: want 7\n%s", res)
			}
			if !waitPidGone(rtPid, 5*time.Second) {
				t.Errorf("the runtime (pid %d) is still there", rtPid)
			}
			assertNoTrace(t, r, c.id, c.pid, c.b.dir)
		})
		t.Run(mode+"/exec", func(t *testing.T) {
			t.Parallel()
			r, u := forwardRT(t, mode)
			c := r.start(newBundle(t, u, "sleep", "1000"))
			out := filepath.Join(tempDir(t), "exec.stdout")
			f, err := os.Create(out)
			if err != nil {
				t.Fatal(err)
			}
			if u != nil {
				_ = f.Chown(u.uid, u.gid)
			}
			ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
			defer cancel()
			cmd := r.command(ctx, "exec", c.id, "sh", "-c", forwardScript)
			cmd.Stdout, cmd.Stderr = f, f
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			f.Close()
			stdout := func() string { b, _ := os.ReadFile(out); return string(b) }
			for !strings.Contains(stdout(), "ready\n") {
				select {
				case <-ctx.Done():
					t.Fatalf("exec never started: %q", stdout())
				case <-time.After(10 * time.Millisecond):
				}
			}
			// The runtime's own pid: under runuser (rootless) it is not
			// cmd's, but the exec'd process's parent.
			rtPid := cmd.Process.Pid
			if u != nil {
				rtPid = execRuntimePid(t, c.pid)
			}
			forwardedSignals(t, rtPid, stdout)
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 7 {
				t.Errorf("exec whose process exits 7 on SIGTERM: %v, want exit 7; output %q", err, stdout())
			}
			r.ok("delete", "--force", c.id)
			assertNoTrace(t, r, c.id, c.pid, c.b.dir)
		})
	}
}

// forwardRT is a root or a rootless runner, and the bundle's user.
func forwardRT(t *testing.T, mode string) (*rt, *testUser) {
	t.Helper()
	if mode == "root" {
		needRoot(t)
		return newRT(t), nil
	}
	u := needTestUser(t)
	return newRootlessRT(t), u
}

// execRuntimePid finds the runtime of a foreground exec into the
// container whose init is initPid: the parent of the container's
// process that is not its init.
func execRuntimePid(t *testing.T, initPid int) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == initPid {
			continue
		}
		a, err1 := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
		b, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", initPid))
		if err1 != nil || err2 != nil || a != b {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if bytes.HasPrefix(cmdline, []byte("sh\x00-c\x00")) {
			return parentPid(t, pid)
		}
	}
	t.Fatalf("no exec'd sh in the pid namespace of %d", initPid)
	return 0
}
