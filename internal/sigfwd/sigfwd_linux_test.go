//go:build linux && cgo

package sigfwd

import (
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// caught reads the mask of signals with a handler from /proc/self/status.
func caught(t *testing.T) uint64 { return mask(t, "SigCgt:") }

// mask reads one of /proc/self/status's signal masks (the process', or
// for SigBlk the main thread's).
func mask(t *testing.T, field string) uint64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("%s %q: %v", field, v, err)
			}
			return m
		}
	}
	t.Fatalf("no %s line in /proc/self/status", field)
	return 0
}

// bit is s's bit in a mask of signals (SigCgt's, taken).
func bit(s syscall.Signal) uint64 { return 1 << (uint(s) - 1) }

// handler reads signal n's current handler address from the kernel.
func handler(t *testing.T, n int) uintptr { return action(t, n)[0] }

// action reads signal n's action from the kernel: handler, flags,
// restorer, and the mask of signals blocked while the handler runs.
func action(t *testing.T, n int) [4]uintptr {
	t.Helper()
	var act [4]uintptr
	if _, _, e := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(n), 0, uintptr(unsafe.Pointer(&act)), 8, 0, 0); e != 0 {
		t.Fatalf("rt_sigaction(%d): %v", n, e)
	}
	return act
}

// expect sends s to this process and waits for it on c.
func expect(t *testing.T, c <-chan os.Signal, s syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), s); err != nil {
		t.Fatalf("kill %v: %v", s, err)
	}
	timeout := time.After(5 * time.Second)
	for {
		select {
		case got := <-c:
			if got == s {
				return
			}
			t.Logf("while waiting for %v: got %v", s, got)
		case <-timeout:
			t.Fatalf("signal %d (%v) sent to this process never reached the channel", int(s), s)
		}
	}
}

// TestTakesOverGoHandlers: the C handler takes exactly the candidates
// whose handler is the Go runtime's and the defaultOK ones found at their
// default, and the signals the Go runtime
// catches from the start and drops when unwanted are among them (the
// control: if a Go release stops catching them, this fails before
// anything relies on it).
func TestTakesOverGoHandlers(t *testing.T) {
	relays.waitStops() // an earlier test's os/signal Stop, which changes dispositions
	before := caught(t)
	for _, s := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGTERM, 35, 64} {
		if before&bit(s) == 0 {
			t.Errorf("signal %d has no handler at start (SigCgt %#x): the Go runtime does not catch it from the start", int(s), before)
		}
	}
	ignored := mask(t, "SigIgn:")
	var want uint64
	for _, s := range candidates() {
		want |= before & bit(syscall.Signal(s))
	}
	for _, s := range defaultOK {
		if (before|ignored)&bit(s) == 0 {
			want |= bit(s) // at its default
		}
	}
	c := make(chan os.Signal, 1)
	r := Notify(c)
	defer r.Stop()
	if r.taken != want {
		t.Fatalf("taken %#x, want the candidates with a handler %#x", r.taken, want)
	}
	h := handler(t, int(syscall.SIGUSR1))
	for n := 1; n <= 64; n++ {
		if got := handler(t, n); (r.taken&bit(syscall.Signal(n)) != 0) != (got == h) {
			t.Errorf("signal %d: handler %#x, the C handler %#x, taken %v", n, got, h, r.taken&bit(syscall.Signal(n)) != 0)
		}
	}
}

// TestLeavesIgnored: a candidate found ignored is not taken over; it is
// relayed through os/signal.
func TestLeavesIgnored(t *testing.T) {
	signal.Ignore(syscall.SIGUSR2)
	defer signal.Reset(syscall.SIGUSR2) // the Go runtime's handler again
	c := make(chan os.Signal, 4)
	r := Notify(c)
	defer r.Stop()
	if r.taken&bit(syscall.SIGUSR2) != 0 {
		t.Fatalf("the ignored SIGUSR2 was taken over (taken %#x)", r.taken)
	}
	<-r.Ready()
	expect(t, c, syscall.SIGUSR2)
}

// TestRelaysEverySignal: every signal a runtime forwards, sent to the
// process, reaches the channel, by the C handler or by os/signal; the C
// ones at once, before os/signal's registration is done.
func TestRelaysEverySignal(t *testing.T) {
	c := make(chan os.Signal, 16)
	r := Notify(c)
	defer r.Stop()
	for _, s := range forwarded() {
		if s := s.(syscall.Signal); r.taken&bit(s) != 0 {
			expect(t, c, s)
		}
	}
	<-r.Ready()
	m := caught(t)
	for _, s := range rest(r.taken) {
		s := s.(syscall.Signal)
		if m&bit(s) == 0 {
			// Its default action would end the test. The Go runtime
			// installs no handler for 34 (musl's), wanted or not; the
			// C handler takes it at its default, unless it was ignored.
			if s != 34 {
				t.Errorf("signal %d has no handler with the relay ready (SigCgt %#x)", int(s), m)
			}
			continue
		}
		expect(t, c, s)
	}
	if n := len(forwarded()); n != 64-7 {
		t.Errorf("%d signals relayed, want the 57 of 1-64 but SIGKILL, SIGSTOP, SIGCHLD, SIGURG, SIGPROF, 32 and 33", n)
	}
}

// TestStopRestores: after Stop the previous handler (the Go runtime's)
// is back, the channel gets no more of the C ones, and os/signal can
// deliver them again to whoever asks.
func TestStopRestores(t *testing.T) {
	usr1, rt := int(syscall.SIGUSR1), 40
	before := []uintptr{handler(t, usr1), handler(t, rt)}
	c := make(chan os.Signal, 16)
	r := Notify(c)
	if h := handler(t, usr1); h == before[0] {
		t.Fatalf("SIGUSR1's handler is still %#x with a relay in place", h)
	}
	<-r.Ready()
	r.Stop()
	r.Stop() // a second Stop does nothing
	if after := []uintptr{handler(t, usr1), handler(t, rt)}; after[0] != before[0] || after[1] != before[1] {
		t.Fatalf("handlers after Stop %#x, before Notify %#x", after, before)
	}
	c2 := make(chan os.Signal, 4)
	signal.Notify(c2, syscall.SIGUSR1, syscall.Signal(rt))
	defer signal.Stop(c2)
	expect(t, c2, syscall.SIGUSR1)
	expect(t, c2, syscall.Signal(rt))
	for {
		select {
		case s := <-c:
			if s == syscall.SIGUSR1 || s == syscall.Signal(rt) {
				t.Fatalf("the stopped relay's channel got %v", s)
			}
		default:
			return
		}
	}
}

// TestTwoRelays: relays in place at once each get every signal; the C
// handler stays until the last one stops.
func TestTwoRelays(t *testing.T) {
	c1, c2 := make(chan os.Signal, 4), make(chan os.Signal, 4)
	r1, r2 := Notify(c1), Notify(c2)
	defer r2.Stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	for _, c := range []chan os.Signal{c1, c2} {
		select {
		case s := <-c:
			if s != syscall.SIGUSR2 {
				t.Fatalf("got %v, want SIGUSR2", s)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("SIGUSR2 reached one relay's channel only")
		}
	}
	<-r1.Ready()
	r1.Stop()
	expect(t, c2, syscall.SIGUSR2)
	expect(t, c2, syscall.Signal(50))
}

// BenchmarkNotify is the cost this package exists to cut: Notify and
// Stop of every forwarded signal, against signal.Notify(c) of all of
// them (runc's way). Both undo their registration, so every iteration
// pays its own.
func BenchmarkNotify(b *testing.B) {
	b.Run("sigfwd", func(b *testing.B) {
		for b.Loop() {
			c := make(chan os.Signal, 1)
			r := Notify(c)
			<-r.Ready()
			r.Stop()
			signal.Stop(c)
		}
	})
	b.Run("os-signal", func(b *testing.B) {
		for b.Loop() {
			c := make(chan os.Signal, 1)
			signal.Notify(c)
			signal.Stop(c)
		}
	})
}

// TestBlockedAtStart: in a process started with SIGUSR1 blocked (the Go
// runtime keeps it blocked in every thread), the C handler would never
// run; SIGUSR1 is left to os/signal, whose own thread unblocks it, and
// still relayed. The process is this test binary, started again by
// python3 with the signal blocked.
func TestBlockedAtStart(t *testing.T) {
	if os.Getenv("SIGFWD_BLOCKED_CHILD") == "1" {
		if blk := mask(t, "SigBlk:"); blk&bit(syscall.SIGUSR1) == 0 {
			t.Fatalf("control: SIGUSR1 is not blocked in this thread (SigBlk %#x)", blk)
		}
		c := make(chan os.Signal, 4)
		r := Notify(c)
		defer r.Stop()
		if r.taken&bit(syscall.SIGUSR1) != 0 {
			t.Fatalf("SIGUSR1, blocked at start, was taken over (taken %#x)", r.taken)
		}
		if r.taken&bit(syscall.SIGUSR2) == 0 {
			t.Fatalf("SIGUSR2, not blocked, was not taken over (taken %#x)", r.taken)
		}
		<-r.Ready()
		expect(t, c, syscall.SIGUSR1)
		expect(t, c, syscall.SIGUSR2)
		return
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("skipped: no python3 to start a process with a signal blocked")
	}
	cmd := exec.Command(py, "-c", `import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
os.execv(sys.argv[1], sys.argv[1:])`, os.Args[0], "-test.run=^TestBlockedAtStart$", "-test.v")
	cmd.Env = append(os.Environ(), "SIGFWD_BLOCKED_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestBlockedAtStart") {
		t.Fatalf("the child started with SIGUSR1 blocked: %v\n%s", err, out)
	}
}

// TestHandlerMask: while the C handler runs, every signal is blocked,
// as under the Go runtime's own handler (the control): handlers never
// nest on the thread's signal stack. Nested, a burst of different
// signals overflowed it (a SIGSEGV from the kernel, in 1 of about 60
// runs of TestRelaysEverySignal).
func TestHandlerMask(t *testing.T) {
	goMask := uint64(action(t, int(syscall.SIGUSR1))[3])
	for _, s := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM, 40, 64} {
		if goMask&bit(s) == 0 {
			t.Fatalf("control: the Go runtime's handler does not block signal %d while it runs (%#x)", int(s), goMask)
		}
	}
	c := make(chan os.Signal, 1)
	r := Notify(c)
	defer r.Stop()
	for n := 1; n <= 64; n++ {
		if r.taken&bit(syscall.Signal(n)) == 0 {
			continue
		}
		if m := uint64(action(t, n)[3]); m&goMask != goMask {
			t.Errorf("signal %d: the C handler blocks %#x while it runs, the Go runtime's %#x", n, m, goMask)
		}
	}
}

// TestBurst: real-time signals queue rather than merge, so a burst of
// them is delivered one after another as fast as the handler returns:
// the process survives 300, and every one of them is relayed.
func TestBurst(t *testing.T) {
	c := make(chan os.Signal, 512)
	r := Notify(c)
	defer r.Stop()
	pid := os.Getpid()
	const n = 300
	for i := 0; i < n; i++ {
		if err := syscall.Kill(pid, syscall.Signal(35+i%30)); err != nil {
			t.Fatal(err)
		}
	}
	timeout := time.After(10 * time.Second)
	for got := 0; got < n; {
		select {
		case s := <-c:
			if s := s.(syscall.Signal); s < 35 || s > 64 {
				t.Fatalf("got %v during the burst", s)
			}
			got++
		case <-timeout:
			t.Fatalf("%d of the %d real-time signals relayed", got, n)
		}
	}
}

// TestForkedChildGetsDefault: a signal the C handler took at its default
// (34: its default ends the process) that reaches a child this process
// forked, before an exec, gets its default action in the child and is
// not relayed: the child is killed by it, and the channel stays empty.
// The control: without the relay, the same child is killed the same way.
func TestForkedChildGetsDefault(t *testing.T) {
	child := func() syscall.WaitStatus {
		t.Helper()
		pid, err := forkKill(34)
		if err != nil {
			t.Fatal(err)
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
			t.Fatal(err)
		}
		return ws
	}
	if ws := child(); !ws.Signaled() || ws.Signal() != 34 {
		t.Fatalf("control: a forked child sending itself 34 without the relay: status %#x, want killed by 34", ws)
	}
	c := make(chan os.Signal, 4)
	r := Notify(c)
	defer r.Stop()
	if r.taken&bit(34) == 0 {
		t.Skip("signal 34 not taken at its default here (ignored or blocked at start): nothing to test")
	}
	if ws := child(); !ws.Signaled() || ws.Signal() != 34 {
		t.Errorf("a forked child sending itself 34 with the relay: status %#x, want killed by 34 (its default action)", ws)
	}
	select {
	case s := <-c:
		t.Errorf("the child's signal was relayed: %v", s)
	case <-time.After(200 * time.Millisecond):
	}
	expect(t, c, 34) // this process' own 34 still is
}

// TestNotifyAfterStop: a relay made right after another's Stop gets
// SIGHUP when SIGHUP was ignored (a runtime started under nohup). The
// first relay leaves it to os/signal, whose Stop, in the background,
// puts SIG_IGN back; a second relay that took the handler os/signal had
// installed in the meantime lost it to that SIG_IGN (TestRelaysEverySignal
// failed that way, 1 run in 6 under nohup). Notify now waits for Stops
// under way. The control: SIGHUP is ignored when the loop starts. It is
// left ignored.
func TestNotifyAfterStop(t *testing.T) {
	signal.Ignore(syscall.SIGHUP)
	if h := handler(t, int(syscall.SIGHUP)); h != 1 { // SIG_IGN
		t.Fatalf("control: SIGHUP's handler %#x after signal.Ignore, want SIG_IGN", h)
	}
	for i := 0; i < 50; i++ {
		a := Notify(make(chan os.Signal, 4))
		<-a.Ready()
		a.Stop()
		c := make(chan os.Signal, 4)
		b := Notify(c)
		<-b.Ready()
		expect(t, c, syscall.SIGHUP)
		b.Stop()
	}
}
