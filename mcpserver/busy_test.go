package mcpserver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/spec"
)

// busy tells its func only when the work in flight goes from none to
// some and back, in order; nil and func-less counters count nothing.
func TestBusyTransitions(t *testing.T) {
	var got []bool
	b := &busy{f: func(v bool) { got = append(got, v) }}
	endA := b.start()
	endB := b.start()
	endA()
	endC := b.start()
	endB()
	endC()
	b.start()()
	if want := []bool{true, false, true, false}; !slices.Equal(got, want) {
		t.Errorf("transitions %v, want %v", got, want)
	}
	var nilBusy *busy
	nilBusy.start()()
	(&busy{}).start()()
}

// busyLog records Options.Busy's calls.
type busyLog struct {
	mu   sync.Mutex
	seen []bool
}

func (l *busyLog) set(v bool) {
	l.mu.Lock()
	l.seen = append(l.seen, v)
	l.mu.Unlock()
}

func (l *busyLog) state() (busy bool, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen) > 0 && l.seen[len(l.seen)-1], len(l.seen)
}

// waitQuiet waits until the server has been not busy, with no call of
// Busy, for 200 ms (every pool that can fill has filled).
func (l *busyLog) waitQuiet(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, n := l.state()
		time.Sleep(200 * time.Millisecond)
		if b2, n2 := l.state(); !b && !b2 && n == n2 && n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never stopped being busy: %v", l.seen)
		}
	}
}

// The server is busy while a pool launches and while a cold call runs,
// and not while a warm call runs: Busy's calls alternate, starting with
// true.
func TestBusyLaunchesAndColdRuns(t *testing.T) {
	f := newFake()
	log := &busyLog{}
	s, cs := connectOpts(t, Options{Runtime: f, Pool: 1, Busy: log.set})
	waitReady(t, s, 1)
	log.waitQuiet(t)
	drain(f.started)
	_, before := log.state()

	// A warm call, held in the fake runtime: not busy work.
	done := make(chan struct{}, 2)
	go func() {
		call(t, context.Background(), cs, map[string]any{"expression": "barrier"})
		done <- struct{}{}
	}()
	<-f.started
	time.Sleep(100 * time.Millisecond)
	if b, n := log.state(); b || n != before {
		t.Errorf("a warm call in flight: busy %v after %d calls of Busy, want false after %d", b, n, before)
	}
	// A second call at once finds the pool empty (the refill waits for
	// the calls): cold, busy until it ends.
	go func() {
		call(t, context.Background(), cs, map[string]any{"expression": "barrier"})
		done <- struct{}{}
	}()
	<-f.started
	if b, _ := log.state(); !b {
		t.Error("a cold call in flight: the server is not busy")
	}
	f.release <- struct{}{}
	f.release <- struct{}{}
	<-done
	<-done
	log.waitQuiet(t) // the refill launched, and ended
	if st := s.PoolStats()["calculator"]; st[0] < 1 {
		t.Errorf("no call was warm: %v", st)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for i, v := range log.seen {
		if v != (i%2 == 0) {
			t.Fatalf("Busy's calls do not alternate from true: %v", log.seen)
		}
	}
}

// A warm call whose sandbox has a network allowlist is busy work: this
// process relays its traffic.
func TestBusyNetworkedWarmCall(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "calculator")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "examples", "skills", "calculator"))); err != nil {
		t.Fatal(err)
	}
	manifest := "input:\n  schema: schema.json\nnetwork:\n  hosts:\n    - example.com:443\nlimits:\n  memory: 64Mi\n  pids: 16\n  timeout: 5s\n"
	if err := os.WriteFile(filepath.Join(dir, "sandbox.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFake()
	log := &busyLog{}
	s, err := New(Options{Runtime: f, Dirs: []string{root}, Pool: 1, Busy: log.set,
		Run: runner.Options{TempDir: t.TempDir(), Grants: spec.Grants{Network: "allow"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	cs := connectClient(t, s, nil)
	// The grant covers the manifest's host: the skill runs.
	if r, _ := call(t, context.Background(), cs, map[string]any{"expression": "1"}); r.IsError {
		t.Fatalf("the networked calculator: %s", textOf(r))
	}
	waitReady(t, s, 1)
	log.waitQuiet(t)
	drain(f.started)
	warm := s.PoolStats()["calculator"][0]
	done := make(chan struct{})
	go func() {
		call(t, context.Background(), cs, map[string]any{"expression": "barrier"})
		close(done)
	}()
	<-f.started
	if b, _ := log.state(); !b {
		t.Error("a warm call with a network allowlist in flight: the server is not busy")
	}
	f.release <- struct{}{}
	<-done
	if st := s.PoolStats()["calculator"]; st[0] != warm+1 {
		t.Errorf("the call was not warm: %v", st)
	}
	log.waitQuiet(t)
}

// drain empties c.
func drain(c chan string) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}
