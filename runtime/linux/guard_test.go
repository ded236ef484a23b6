//go:build linux

package linux

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/runc/libcontainer/system"
	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/runtime"
)

func TestGuardState(t *testing.T) {
	s := newGuardState()
	s.apply(guardMsg{Op: "add", Root: "/r", ID: "a", At: 100})
	s.apply(guardMsg{Op: "add", Root: "/r", ID: "b"})
	s.apply(guardMsg{Op: "add", Root: "/other", ID: "a", At: 50})
	s.apply(guardMsg{Op: "add", Root: "relative", ID: "c"}) // refused
	s.apply(guardMsg{Op: "add", Root: "/r", ID: "../x"})    // refused
	s.apply(guardMsg{Op: "deadline", Root: "/r", ID: "b", At: 70})
	s.apply(guardMsg{Op: "deadline", Root: "/r", ID: "zz", At: 1}) // not registered
	if n := s.next(); n != 50 {
		t.Errorf("next = %d, want 50", n)
	}
	if d := s.due(60); len(d) != 1 || d[0].Root != "/other" {
		t.Errorf("due(60) = %+v", d)
	}
	if d := s.due(60); len(d) != 0 {
		t.Errorf("due twice: %+v", d)
	}
	if n := s.next(); n != 70 {
		t.Errorf("next = %d, want 70", n)
	}
	s.apply(guardMsg{Op: "deadline", Root: "/r", ID: "b"}) // cleared
	s.apply(guardMsg{Op: "del", Root: "/other", ID: "a"})
	if n := s.next(); n != 100 {
		t.Errorf("next = %d, want 100", n)
	}
	var ids []string
	for _, o := range s.orphans() {
		ids = append(ids, o.Root+":"+o.ID)
	}
	sort.Strings(ids)
	if strings.Join(ids, ",") != "/r:a,/r:b" {
		t.Errorf("orphans = %v", ids)
	}
}

// recorder records what runGuard does.
type recorder struct {
	mu      sync.Mutex
	killed  []string
	removed []string
	at      map[string]time.Time
}

func (r *recorder) kill(m guardMsg) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.killed = append(r.killed, m.ID)
	r.at[m.ID] = time.Now()
}

func (r *recorder) remove(m guardMsg) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removed = append(r.removed, m.ID)
}

// goRunGuard runs runGuard on msgs in a goroutine; the channel closes
// when it returns.
func goRunGuard(msgs <-chan guardMsg, rec *recorder, refresh func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		runGuard(msgs, rec, monoNow, refresh)
		close(done)
	}()
	return done
}

func TestRunGuard(t *testing.T) {
	rec := &recorder{at: map[string]time.Time{}}
	msgs := make(chan guardMsg)
	done := goRunGuard(msgs, rec, nil)
	start := time.Now()
	msgs <- guardMsg{Op: "add", Root: "/r", ID: "late", At: monoAt(start.Add(300 * time.Millisecond))}
	msgs <- guardMsg{Op: "add", Root: "/r", ID: "soon", At: monoAt(start.Add(100 * time.Millisecond))}
	msgs <- guardMsg{Op: "add", Root: "/r", ID: "none"}
	msgs <- guardMsg{Op: "add", Root: "/r", ID: "gone", At: monoAt(start.Add(150 * time.Millisecond))}
	msgs <- guardMsg{Op: "del", Root: "/r", ID: "gone"}
	// An egress helper's detached container: killed, never removed.
	msgs <- guardMsg{Op: "add", Root: "/r", ID: "kept", Keep: true}
	time.Sleep(500 * time.Millisecond)
	rec.mu.Lock()
	killed := append([]string(nil), rec.killed...)
	soon, late := rec.at["soon"].Sub(start), rec.at["late"].Sub(start)
	rec.mu.Unlock()
	if strings.Join(killed, ",") != "soon,late" {
		t.Errorf("killed %v, want soon then late", killed)
	}
	if soon < 100*time.Millisecond || soon > 250*time.Millisecond || late < 300*time.Millisecond || late > 450*time.Millisecond {
		t.Errorf("kills at %s and %s, want 100 ms and 300 ms", soon, late)
	}
	close(msgs) // the runner is gone
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("runGuard did not return at the end of its input")
	}
	sort.Strings(rec.removed)
	if strings.Join(rec.removed, ",") != "late,none,soon" {
		t.Errorf("removed %v, want every container still registered but the kept one", rec.removed)
	}
	if k := rec.killed[len(rec.killed)-1]; len(rec.killed) != 3 || k != "kept" {
		t.Errorf("killed %v, want the kept container killed last (its runner gone)", rec.killed)
	}
}

// TestRunGuardRefresh: with a reader that reads the pipe only when
// asked, a deadline of the guard's own state asks for a read first and
// kills only what is still due after it: a container released meanwhile
// (its "del" still in the pipe) is not killed, one still registered is.
func TestRunGuardRefresh(t *testing.T) {
	rec := &recorder{at: map[string]time.Time{}}
	msgs := make(chan guardMsg)
	// The pipe's unread lines: what the reader delivers when asked, then
	// its tick.
	var mu sync.Mutex
	var pipe []guardMsg
	asked := 0
	refresh := func() {
		mu.Lock()
		asked++
		lines := append(pipe, guardMsg{Op: opTick})
		pipe = nil
		mu.Unlock()
		go func() {
			for _, m := range lines {
				msgs <- m
			}
		}()
	}
	done := goRunGuard(msgs, rec, refresh)
	start := time.Now()
	msgs <- guardMsg{Op: "add", Root: "/r", ID: "released", At: monoAt(start.Add(100 * time.Millisecond))}
	msgs <- guardMsg{Op: "add", Root: "/r", ID: "due", At: monoAt(start.Add(150 * time.Millisecond))}
	mu.Lock()
	pipe = append(pipe, guardMsg{Op: "del", Root: "/r", ID: "released"})
	mu.Unlock()
	time.Sleep(400 * time.Millisecond)
	rec.mu.Lock()
	killed := strings.Join(rec.killed, ",")
	rec.mu.Unlock()
	mu.Lock()
	n := asked
	mu.Unlock()
	if killed != "due" {
		t.Errorf("killed %q, want only the container still registered after the read (due)", killed)
	}
	if n < 1 {
		t.Error("runGuard never asked for a read of the pipe at a deadline")
	}
	close(msgs)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("runGuard did not return at the end of its input")
	}
}

func TestRemoveUnlocked(t *testing.T) {
	g := osGuard{lockAttempts: 200, removeAttempts: 25}
	dir := t.TempDir()
	mk := func(name string) (string, string) {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		lock := d + ".owner"
		if err := os.WriteFile(lock, []byte("id"), 0o600); err != nil {
			t.Fatal(err)
		}
		return d, lock
	}
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }

	// Held by a live owner (another open file description): kept.
	d, lock := mk("held")
	f, err := os.Open(lock)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	(osGuard{lockAttempts: 4}).removeUnlocked(lock, []string{d})
	if !exists(d) || !exists(lock) {
		t.Error("removed while its lock is held")
	}
	// Released soon after (a dead runner's exit closes its pipe, then
	// its lock): removed.
	time.AfterFunc(100*time.Millisecond, func() { f.Close() })
	g.removeUnlocked(lock, []string{d})
	if exists(d) || exists(lock) {
		t.Error("not removed once its lock is free")
	}

	// No lock file: nothing is removed (a folder never exists without one).
	d, lock = mk("nolock")
	os.Remove(lock)
	g.removeUnlocked(lock, []string{d})
	if !exists(d) {
		t.Error("removed without its lock file")
	}

	// A symlink in the lock's place is not followed.
	d, lock = mk("symlink")
	os.Remove(lock)
	if err := os.Symlink("/etc/hostname", lock); err != nil {
		t.Fatal(err)
	}
	g.removeUnlocked(lock, []string{d})
	if !exists(d) {
		t.Error("removed through a symlinked lock")
	}

	// A folder that cannot be removed (an immutable file in it): the lock
	// file stays, for a later collection to find it; once removable,
	// both go.
	d, lock = mk("stuck")
	stuck := filepath.Join(d, "sub", "immutable")
	if err := os.WriteFile(stuck, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	setFlags := func(flags int) error {
		f, err := os.Open(stuck)
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, flags)
	}
	if err := setFlags(fsImmutableFL); err != nil {
		t.Logf("cannot make a file immutable here (%v): the stuck-folder case is not checked", err)
	} else {
		(osGuard{removeAttempts: 1}).removeUnlocked(lock, []string{d})
		if !exists(lock) {
			t.Error("the lock file was removed with its folder left")
		}
		if err := setFlags(0); err != nil {
			t.Fatal(err)
		}
		g.removeUnlocked(lock, []string{d})
		if exists(d) || exists(lock) {
			t.Error("not removed once removable")
		}
	}

	if os.Geteuid() == 0 {
		// Another user's lock file: kept.
		d, lock = mk("foreign")
		if err := os.Chown(lock, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		g.removeUnlocked(lock, []string{d})
		if !exists(d) {
			t.Error("removed under another user's lock file")
		}
	}
}

// guardRunnerEnv makes the test binary a runner that registers a fake
// container with its guard (see guardRunner).
const guardRunnerEnv = "SKILLRUN_GUARD_TEST_RUNNER"

// guardRunner is a runner for TestGuardProcess: it claims a folder the
// way the skill runner does (an owner file it flocks, then the folder),
// guards a container that does not exist under a state root, with the
// folder to remove, then does what GUARD_MODE says, prints "ready PID"
// (its guard's) and waits to be killed. Modes: "" nothing more;
// "killfirst" kills its guard and waits for the replacement; "released"
// releases the container; "deadline" sets its deadline 100 ms ahead;
// "lockfile" takes the container's lock (as a create does first);
// "closed" releases the container and closes the guard (a clean exit);
// "many" guards and releases 300 more (past the stub's hand-over).
func guardRunner() {
	dir, root := os.Getenv("GUARD_DIR"), os.Getenv("GUARD_ROOT")
	f, err := os.OpenFile(dir+".owner", os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
	}
	if err == nil {
		err = os.Mkdir(dir, 0o700)
	}
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(1)
	}
	if err != nil {
		fail(err)
	}
	r := &Runtime{root: root, warn: func(string) {}, guards: newGuardClient("/proc/self/exe")}
	g, err := r.Guard("guarded-1", runtime.GuardOpts{Lock: dir + ".owner", Remove: []string{dir}})
	if err == nil {
		err = r.waitGuard("guarded-1")
	}
	if err != nil {
		fail(err)
	}
	pid := guardPid(r)
	switch os.Getenv("GUARD_MODE") {
	case "killfirst":
		_ = unix.Kill(pid, unix.SIGKILL)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if p := guardPid(r); p != 0 && p != pid {
				pid = p
				break
			}
			if time.Now().After(deadline) {
				fail(errors.New("the guard was not replaced"))
			}
		}
	case "released":
		g.Release()
	case "deadline":
		if err := g.SetDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
			fail(err)
		}
	case "closed":
		// A clean exit: everything released, then CloseGuard.
		g.Release()
		r.CloseGuard(5 * time.Second)
	case "lockfile":
		// Killed between its lock and the create: only the lock file.
		if _, err := r.lock("guarded-1"); err != nil {
			fail(err)
		}
	case "many":
		for i := 0; i < 300; i++ {
			o, err := r.Guard(fmt.Sprintf("other-%d", i), runtime.GuardOpts{Remove: []string{dir + "-other"}})
			if err != nil {
				fail(err)
			}
			o.Release()
		}
	}
	fmt.Println("ready", pid)
	select {}
}

// guardPid is the pid of this process' running guard (0: none yet).
func guardPid(r *Runtime) int {
	r.guards.mu.Lock()
	p := r.guards.cur
	r.guards.mu.Unlock()
	if p == nil {
		return 0
	}
	<-p.ready
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// threads is the number of threads of pid: 1 while the guard is its C
// stub, more once the Go runtime started.
func threads(pid int) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// TestGuardProcess runs the real guard process under a runner (this
// test binary) that is SIGKILLed: the guard removes what was registered
// within a second, and exits; with the guard killed first, the runner
// starts another, which does the same. The guard stays its C stub (one
// thread, no Go runtime) until it has work: a deadline, a runner that
// wrote past the hand-over, a runner gone with something registered; a
// runner gone with nothing registered ends the stub alone.
func TestGuardProcess(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		goGuard bool // the Go guard runs before the runner's kill
		removed bool
	}{{"", false, true}, {"killfirst", false, true}, {"released", false, false}, {"deadline", true, true}, {"many", true, true}, {"lockfile", false, true}, {"closed", false, false}} {
		t.Run("mode="+tc.mode, func(t *testing.T) {
			base := t.TempDir()
			dir, root := filepath.Join(base, "bundle"), filepath.Join(base, "state")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), guardRunnerEnv+"=1", "GUARD_DIR="+dir, "GUARD_ROOT="+root, "GUARD_MODE="+tc.mode)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			line, _ := bufio.NewReader(out).ReadString('\n')
			var guardPID int
			if _, err := fmt.Sscanf(line, "ready %d", &guardPID); err != nil {
				t.Fatalf("runner: %q", line)
			}
			if _, err := os.Stat(dir); err != nil {
				t.Fatalf("control: the runner's folder is missing: %v", err)
			}
			if tc.mode == "closed" {
				// Ended and reaped by its runner: not even a zombie.
				if _, err := os.Stat(fmt.Sprintf("/proc/%d", guardPID)); !os.IsNotExist(err) {
					t.Errorf("after CloseGuard, guard %d still exists (%v)", guardPID, err)
				}
				if _, err := os.Stat(dir); err != nil {
					t.Errorf("CloseGuard with nothing registered removed the folder: %v", err)
				}
				return
			}
			if !processAlive(guardPID) {
				t.Fatalf("control: guard %d not running", guardPID)
			}
			// The guard is not in the runner's process group or session.
			if sid, _ := unix.Getsid(guardPID); sid != guardPID {
				t.Errorf("guard %d: session %d, want its own", guardPID, sid)
			}
			time.Sleep(300 * time.Millisecond)
			if n := threads(guardPID); (n > 1) != tc.goGuard {
				t.Errorf("guard has %d threads before the runner's kill: want the Go guard %v", n, tc.goGuard)
			}
			killed := time.Now()
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			for {
				_, derr := os.Lstat(dir)
				_, lerr := os.Lstat(dir + ".owner")
				gone := os.IsNotExist(derr) && os.IsNotExist(lerr)
				if gone == tc.removed && !processAlive(guardPID) {
					break
				}
				if time.Since(killed) > time.Second {
					t.Fatalf("1 s after the runner's SIGKILL: folder %v, owner file %v, guard alive %v (want removed %v)", derr, lerr, processAlive(guardPID), tc.removed)
				}
				time.Sleep(2 * time.Millisecond)
			}
			t.Logf("guard done %s after the runner's SIGKILL", time.Since(killed).Round(time.Millisecond))
			if tc.mode == "lockfile" {
				if _, err := os.Lstat(filepath.Join(root, lockDirName, "guarded-1")); !os.IsNotExist(err) {
					t.Errorf("the lock file of a create killed before its state folder is left: %v", err)
				}
			} else if _, err := os.Lstat(root); !os.IsNotExist(err) {
				t.Errorf("the guard made the state root of a container that never existed: %v", err)
			}
		})
	}
}

// processAlive: not gone, not a zombie (the guard is not our child).
func processAlive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// TestGuardClientMessages checks what the runner side writes: one JSON
// line per message, the registration first, the deadline on
// CLOCK_MONOTONIC, the release last; a second Guard of the same ID fails.
func TestGuardClientMessages(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := &guardProc{w: w, ready: make(chan struct{}), timer: -1, count: -1, drainAt: 1 << 20}
	close(p.ready)
	c := &guardClient{entries: map[guardKey]*guardMsg{}, cur: p}
	rt := &Runtime{root: "/state", systemd: true, rootlessCgroups: true, guards: c}
	g, err := rt.Guard("box-1", runtime.GuardOpts{Lock: "/tmp/x.owner", Remove: []string{"/tmp/x"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Guard("box-1", runtime.GuardOpts{}); err == nil {
		t.Error("a second Guard of the same container succeeded")
	}
	before := monoNow()
	if err := g.SetDeadline(time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	after := monoNow()
	g.Release()
	g.Release() // once
	w.Close()
	sc := bufio.NewScanner(r)
	var got []guardMsg
	for sc.Scan() {
		var m guardMsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, m)
	}
	if len(got) != 3 {
		t.Fatalf("messages = %+v", got)
	}
	add, dl, del := got[0], got[1], got[2]
	if add.Op != "add" || add.Root != "/state" || add.ID != "box-1" || !add.Systemd || !add.Rootless || add.Lock != "/tmp/x.owner" || len(add.Remove) != 1 || add.At != 0 {
		t.Errorf("add = %+v", add)
	}
	if dl.Op != "deadline" || dl.ID != "box-1" || dl.At < before+int64(900*time.Millisecond) || dl.At > after+int64(time.Second) {
		t.Errorf("deadline = %+v (now %d)", dl, before)
	}
	if del.Op != "del" || del.ID != "box-1" {
		t.Errorf("del = %+v", del)
	}
	if len(c.entries) != 0 {
		t.Errorf("entries left: %v", c.entries)
	}
	if err := rt.waitGuard("box-1"); err != nil {
		t.Errorf("waitGuard of a released container: %v", err)
	}
}

// startGoGuard starts a real guard process (this test binary) for c with
// container m registered, hands it over to the Go guard (the timer set to
// now, as a full pipe or a deadline does) and returns it once the Go
// guard runs (more than one thread).
func startGoGuard(t *testing.T, c *guardClient, m *guardMsg) *guardProc {
	t.Helper()
	if err := c.add(m); err != nil {
		t.Fatal(err)
	}
	p := handOver(t, c)
	t.Cleanup(func() {
		c.mu.Lock()
		if c.cur == p {
			c.cur = nil
			p.close()
		}
		c.mu.Unlock()
		<-p.done
	})
	return p
}

// handOver has c's guard process hand over to the Go guard (its timer
// set to now) and returns it once the Go guard runs.
func handOver(t *testing.T, c *guardClient) *guardProc {
	t.Helper()
	c.mu.Lock()
	p := c.cur
	p.arm(1)
	c.mu.Unlock()
	<-p.ready
	if p.err != nil {
		t.Fatal(p.err)
	}
	for deadline := time.Now().Add(5 * time.Second); threads(p.cmd.Process.Pid) <= 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the Go guard did not start after its timer expired")
		}
	}
	return p
}

// TestGuardReadsOnTimer: a running Go guard reads its pipe only when its
// timer expires (the runner's earliest deadline, or half the pipe
// waiting), not at every line: what a runner sends with no deadline due
// stays in the pipe, seen from the runner's end; a deadline that comes
// has it read; and a runner that sends more than the pipe holds is never
// blocked.
func TestGuardReadsOnTimer(t *testing.T) {
	c := newGuardClient("/proc/self/exe")
	first := &guardMsg{Op: "add", Root: "/nonexistent", ID: "first"}
	p := startGoGuard(t, c, first)
	for deadline := time.Now().Add(5 * time.Second); p.unread() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the Go guard did not read what was sent before it started")
		}
	}
	// Lines with no deadline due: a far one, registrations and releases.
	if err := c.deadline(first.key(), monoNow()+int64(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		m := &guardMsg{Op: "add", Root: "/nonexistent", ID: fmt.Sprintf("c%d", i)}
		if err := c.add(m); err != nil {
			t.Fatal(err)
		}
		c.del(m.key())
	}
	time.Sleep(300 * time.Millisecond)
	c.mu.Lock()
	waiting := p.unread()
	c.mu.Unlock()
	if waiting == 0 {
		t.Fatal("the Go guard read lines with no deadline due: it wakes at every line")
	}
	// A deadline due soon: the guard reads the pipe then.
	if err := c.deadline(first.key(), monoNow()+int64(100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); p.unread() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the pipe was not read at the deadline (%d bytes wait)", p.unread())
		}
	}
	if err := c.deadline(first.key(), monoNow()+int64(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Three pipes' worth of lines, no deadline due: never blocked, and
	// read once half the pipe waits.
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		big := &guardMsg{Op: "add", Root: "/nonexistent", Remove: []string{strings.Repeat("x", 1000)}}
		for i := 0; i*1100 < 3*2*p.drainAt; i++ {
			m := *big
			m.ID = fmt.Sprintf("big%d", i)
			if err := c.add(&m); err != nil {
				t.Error(err)
				return
			}
			c.del(m.key())
		}
	}()
	select {
	case <-sent:
	case <-time.After(10 * time.Second):
		t.Fatalf("the runner's writes blocked: %d bytes wait in the pipe", p.unread())
	}
	if n := p.unread(); n > p.drainAt+4096 {
		t.Errorf("%d bytes wait in the pipe, more than half of it (%d)", n, p.drainAt)
	}
}

// TestGuardDeadlineRoot: a guarded container whose caller never kills it
// (no context deadline) is killed by its guard at the deadline.
func TestGuardDeadlineRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs a real container")
	}
	// The guard as a stub when the deadline comes, and as the Go guard
	// already running (sleeping until its timer).
	for _, goGuard := range []bool{false, true} {
		t.Run(fmt.Sprintf("goGuard=%v", goGuard), func(t *testing.T) { guardDeadlineRoot(t, goGuard) })
	}
}

func guardDeadlineRoot(t *testing.T, goGuard bool) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("needs busybox-static for the test rootfs: hack/install-deps.sh test")
	}
	rootfs := busyboxRootfs(t, bb)
	dir := t.TempDir()
	s := ExampleSpec(false)
	s.Root.Path = rootfs
	s.Process.Terminal = false
	s.Process.Args = []string{"sleep", "30"}
	writeSpec(t, dir, s)
	r, err := New(runtime.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	g, err := r.Guard("deadline", runtime.GuardOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	if goGuard {
		handOver(t, r.guards)
	}
	start := time.Now()
	if err := g.SetDeadline(start.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	var info runtime.ExitInfo
	status, err := r.Run(context.Background(), "deadline", runtime.RunOpts{CreateOpts: runtime.CreateOpts{Bundle: dir}, Exit: &info})
	took := time.Since(start)
	if err != nil || status != 137 || info.Signal != unix.SIGKILL {
		t.Fatalf("status %d, signal %v, err %v: want SIGKILL", status, info.Signal, err)
	}
	if took < time.Second || took > 3*time.Second {
		t.Errorf("killed after %s, want about 1 s", took)
	}
}

// BenchmarkGuard measures one guard's life as a runner sees it, in CPU
// time of the guard process (cpu-us/op): started, told one container
// and its release, then the runner's end; exit-us/op is the wait from
// that end to the guard reaped (what CloseGuard adds to a clean exit). "stub" is the usual life (the
// Go runtime never starts), "go" forces the hand-over to the Go guard.
// $SKILLRUN names the binary to start (default: this test binary).
func BenchmarkGuard(b *testing.B) {
	exe := os.Getenv("SKILLRUN")
	if exe == "" {
		exe = "/proc/self/exe"
	}
	for _, handOver := range []bool{false, true} {
		name := "stub"
		if handOver {
			name = "go"
		}
		b.Run(name, func(b *testing.B) {
			var cpu, wall, exit time.Duration
			for i := 0; i < b.N; i++ {
				c := &guardClient{entries: map[guardKey]*guardMsg{}, exe: exe}
				m := &guardMsg{Op: "add", Root: "/nonexistent", ID: "bench"}
				start := time.Now()
				if err := c.add(m); err != nil {
					b.Fatal(err)
				}
				c.mu.Lock()
				p := c.cur
				if handOver {
					p.arm(1)
				}
				c.mu.Unlock()
				<-p.ready
				if p.err != nil {
					b.Fatal(p.err)
				}
				c.del(m.key())
				time.Sleep(5 * time.Millisecond) // a run's length: the guard waits in poll
				c.mu.Lock()
				c.cur = nil
				closed := time.Now()
				p.close() // the runner's end, as CloseGuard does it
				c.mu.Unlock()
				<-p.done
				exit += time.Since(closed)
				wall += time.Since(start) - 5*time.Millisecond
				cpu += p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
			b.ReportMetric(float64(wall.Microseconds())/float64(b.N), "wall-us/op")
			b.ReportMetric(float64(exit.Microseconds())/float64(b.N), "exit-us/op")
		})
	}
}

// fsImmutableFL is FS_IMMUTABLE_FL of linux/fs.h (not in x/sys/unix).
const fsImmutableFL = 0x10

// TestIsInit: a kept container is killed only through its registered
// init: the process must live with the same start time and be the
// container's init by its state.
func TestIsInit(t *testing.T) {
	r := &Runtime{root: t.TempDir(), warn: func(string) {}}
	self := os.Getpid()
	st, err := system.Stat(self)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		pid   int
		start uint64
	}{
		"no init told":          {0, 0},
		"another start time":    {self, st.StartTime + 1},
		"not the container's":   {self, st.StartTime},
		"no such process (pid)": {1 << 30, st.StartTime},
	} {
		if r.isInit("box", c.pid, c.start) {
			t.Errorf("%s: isInit is true", name)
		}
	}
}

// TestDeleteMakesNoLock: only create makes a lock file. A delete (force
// or not), pause, resume or update of a container with neither a lock file
// nor a state folder makes none, nor the state root (a runner killed in
// the middle of deleting a dead runner's container, which that runner's
// guard already removed, left a lock file no guard knew of:
// TestLifetimeSoak). A lock file without a state folder (a create cut
// short before it made one) goes with a forced delete.
func TestDeleteMakesNoLock(t *testing.T) {
	root := filepath.Join(t.TempDir(), "state")
	r := &Runtime{root: root, warn: func(string) {}}
	ctx := context.Background()
	if err := r.Delete(ctx, "gone", true); err != nil {
		t.Fatalf("delete --force of nothing: %v", err)
	}
	if err := r.Delete(ctx, "gone", false); !errors.Is(err, runtime.ErrNotExist) {
		t.Fatalf("delete of nothing: %v, want ErrNotExist", err)
	}
	if _, err := os.Lstat(root); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a delete of nothing made the state root (%v)", err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		r.Delete(ctx, "gone", true),
		r.Pause(ctx, "gone"),
		r.Resume(ctx, "gone"),
	} {
		if err != nil && !errors.Is(err, runtime.ErrNotExist) {
			t.Errorf("verb on nothing: %v", err)
		}
	}
	if _, err := r.lockExisting("gone"); !errors.Is(err, errNoContainer) {
		t.Errorf("lockExisting of nothing: %v, want errNoContainer", err)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("verbs on nothing left %v in the state root", ents)
	}

	// An orphan lock (no state folder) goes with delete --force.
	l, err := r.lock("orphan")
	if err != nil {
		t.Fatal(err)
	}
	l.unlock()
	if err := r.Delete(ctx, "orphan", true); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("delete --force of an orphan lock left %v", ents)
	}

	// lockExisting joins a held lock and returns once it is free; one
	// removed meanwhile (its container deleted) is not made again.
	held, err := r.lock("busy")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := r.lockExisting("busy")
		if err == nil {
			l.unlock()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	held.remove()
	if err := <-got; !errors.Is(err, errNoContainer) {
		t.Fatalf("lockExisting of a lock removed while waited on: %v, want errNoContainer", err)
	}
	if _, err := os.Lstat(filepath.Join(root, lockDirName, "busy")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a lock file was made again (%v)", err)
	}

	// A state folder without a lock file gets its lock.
	if err := os.MkdirAll(filepath.Join(root, "old"), 0o700); err != nil {
		t.Fatal(err)
	}
	l, err = r.lockExisting("old")
	if err != nil {
		t.Fatalf("lockExisting of a state folder without a lock file: %v", err)
	}
	l.remove()
}
