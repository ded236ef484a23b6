package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/spec"
)

// waitReady waits until the calculator's pool has n sandboxes ready.
func waitReady(t *testing.T, s *Server, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.PoolStats()["calculator"][1] != n; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("calculator pool: want %d ready, have %v", n, s.PoolStats()["calculator"])
		}
	}
}

func TestPoolWarmCall(t *testing.T) {
	f := newFake()
	s, cs := connectOpts(t, Options{Runtime: f, Pool: 2})
	waitReady(t, s, 2)
	for i := 0; i < 3; i++ {
		r, res := call(t, context.Background(), cs, map[string]any{"expression": "6*7"})
		if r.IsError || !res.OK || string(mustJSON(t, res.Output)) != `{"result":"6*7"}` {
			t.Fatalf("warm call: %s", text(r))
		}
		waitReady(t, s, 2)
	}
	if warm := s.PoolStats()["calculator"][0]; warm != 3 {
		t.Errorf("%d of 3 calls took a warm sandbox", warm)
	}
	// A failing skill through a warm sandbox is the same tool error.
	if r, res := call(t, context.Background(), cs, map[string]any{"expression": "fail"}); !r.IsError || res.OK || res.Stderr != "boom" {
		t.Errorf("warm failure: %s", text(r))
	}
	// Bad input spends no sandbox.
	waitReady(t, s, 2)
	before := s.PoolStats()["calculator"][0]
	if r, _ := call(t, context.Background(), cs, map[string]any{"nope": 1}); !r.IsError {
		t.Errorf("bad input accepted: %s", text(r))
	}
	if after := s.PoolStats()["calculator"][0]; after != before {
		t.Errorf("bad input took a warm sandbox")
	}
	// Skills in input mode argv are never pooled, nor skills without an
	// entry point (no tool); the others are.
	stats := s.PoolStats()
	for name, n := range s.served {
		if _, pooled := stats[name]; pooled != (n.skill.Input.Mode != spec.InputArgv && n.tool != nil) {
			t.Errorf("skill %s (input mode %s): pooled %v", name, n.skill.Input.Mode, pooled)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPoolFloodRunsCold: 6 calls at once with a pool of 1 all run at
// the same time (one warm, the rest cold): the pool never makes a call
// wait.
func TestPoolFloodRunsCold(t *testing.T) {
	f := newFake()
	s, cs := connectOpts(t, Options{Runtime: f, Pool: 1})
	waitReady(t, s, 1)
	concurrentBarrierCalls(t, f, cs, 6)
	if st := s.PoolStats()["calculator"]; st[0] < 1 {
		t.Errorf("no call took the warm sandbox: %v", st)
	}
}

// TestPoolCloseKillsWaiting: Close kills the sandboxes waiting in the
// pools, removes their bundles and returns when they are gone.
func TestPoolCloseKillsWaiting(t *testing.T) {
	f := newFake()
	s, _ := connectOpts(t, Options{Runtime: f, Pool: 1})
	waitReady(t, s, 1)
	tmp := s.opts.Run.TempDir
	ents, _ := os.ReadDir(tmp)
	if len(ents) == 0 {
		t.Fatal("no bundle in TMPDIR while sandboxes wait: the test proves nothing")
	}
	s.Close()
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left in TMPDIR after Close: %v", ents)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.ended) == 0 {
		t.Fatal("no pooled sandbox was ended")
	}
	for id, err := range f.ended {
		if !errors.Is(err, context.Canceled) || !f.deleted[id] {
			t.Errorf("pooled sandbox %s: ended with %v, deleted %v", id, err, f.deleted[id])
		}
	}
	if st := s.PoolStats()["calculator"]; st[1] != 0 {
		t.Errorf("ready after Close: %v", st)
	}
}

// TestPoolCancelWarmCall: cancelling a call served warm kills its sandbox.
func TestPoolCancelWarmCall(t *testing.T) {
	f := newFake()
	s, cs := connectOpts(t, Options{Runtime: f, Pool: 1})
	waitReady(t, s, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "calculator", Arguments: map[string]any{"expression": "block"}})
		done <- err
	}()
	id := <-f.started
	if s.PoolStats()["calculator"][0] != 1 {
		t.Fatal("the call did not take the warm sandbox")
	}
	cancel()
	<-done
	f.waitCancelled(t, id)
}

// TestPoolRecyclesOld: a sandbox that waited longer than PoolMaxAge is
// destroyed and replaced; a call never gets it.
func TestPoolRecyclesOld(t *testing.T) {
	f := newFake()
	s, _ := connectOpts(t, Options{Runtime: f, Pool: 1, PoolMaxAge: 80 * time.Millisecond})
	waitReady(t, s, 1)
	p := s.served["calculator"].pool
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, _ := p.snapshot()
		if st.Recycled >= 2 && st.Launched >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recycling: %+v", st)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	killed := 0
	for id, err := range f.ended {
		if errors.Is(err, context.Canceled) && f.deleted[id] {
			killed++
		}
	}
	if killed < 2 {
		t.Errorf("%d recycled sandboxes killed and deleted, want 2 or more", killed)
	}
}

// TestPoolDrainedWhenSkillGoes: the rescan that sees a skill removed (or
// changed) destroys its waiting sandboxes before it returns.
func TestPoolDrainedWhenSkillGoes(t *testing.T) {
	root := t.TempDir()
	for _, n := range []string{"calculator", "text-stats"} {
		if err := os.CopyFS(filepath.Join(root, n), os.DirFS(filepath.Join("..", "examples", "skills", n))); err != nil {
			t.Fatal(err)
		}
	}
	f := newFake()
	tmp := t.TempDir()
	s, err := New(Options{Runtime: f, Dirs: []string{root}, Run: runner.Options{TempDir: tmp}, Pool: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitReady(t, s, 1)
	// Change the calculator (a new file): its pool is replaced.
	old := s.served["calculator"].pool
	if err := os.WriteFile(filepath.Join(root, "calculator", "NOTES.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.sync()
	if st, ready := old.snapshot(); ready != 0 || st.Launched == 0 {
		t.Errorf("old pool after the change: %+v, %d ready", st, ready)
	}
	if s.served["calculator"].pool == old {
		t.Error("the changed skill kept its old pool")
	}
	waitReady(t, s, 1)
	// Remove it: the new pool's sandbox is destroyed by the rescan.
	cur := s.served["calculator"].pool
	if err := os.RemoveAll(filepath.Join(root, "calculator")); err != nil {
		t.Fatal(err)
	}
	s.sync()
	if _, ready := cur.snapshot(); ready != 0 {
		t.Errorf("removed skill: %d sandboxes still ready", ready)
	}
	if _, ok := s.PoolStats()["calculator"]; ok {
		t.Error("removed skill still has a pool")
	}
	ents, _ := os.ReadDir(tmp)
	for _, e := range ents {
		if strings.Contains(e.Name(), "calculator") {
			t.Errorf("bundle of a drained calculator sandbox left: %s", e.Name())
		}
	}
}

// failingDeps fails every Acquire and counts them.
type failingDeps struct{ n atomic.Int32 }

func (d *failingDeps) Acquire(context.Context, *spec.Skill) (*spec.DepsEnv, *runner.EnvInfo, func(), error) {
	d.n.Add(1)
	return nil, nil, nil, errors.New("npm: No matching version found for marked@999.0.0")
}

// TestPoolFailingLaunchBacksOff: a skill whose warm sandbox cannot launch
// (its dependency build fails) is retried ever less often, not every
// second, and reported once.
func TestPoolFailingLaunchBacksOff(t *testing.T) {
	sk, err := spec.Load(filepath.Join("..", "examples", "skills", "slugify"))
	if err != nil {
		t.Fatal(err)
	}
	deps := &failingDeps{}
	var warns atomic.Int32
	p := newPoolRetry(newFake(), sk, runner.Options{TempDir: t.TempDir(), Deps: deps}, 1, 0, func(string) { warns.Add(1) }, runner.EntryAtLaunch, nil, 10*time.Millisecond)
	time.Sleep(400 * time.Millisecond)
	p.close()
	p.wait()
	// 10, 20, 40, 80, 160 ms: about 5 launches in 400 ms (a fixed 10 ms
	// would be 40).
	if n := deps.n.Load(); n < 2 || n > 8 {
		t.Errorf("%d launches in 400 ms, want the doubling back-off's 2-8", n)
	}
	if w := warns.Load(); w != 1 {
		t.Errorf("%d warnings for one reason, want 1", w)
	}
}

// TestPoolNoLaunchDuringCall: the pool launches nothing while a call of
// its skill runs (warm or cold): a launch would take the CPU from it; it
// refills once the calls have answered.
func TestPoolNoLaunchDuringCall(t *testing.T) {
	f := newFake()
	s, cs := connectOpts(t, Options{Runtime: f, Pool: 1})
	waitReady(t, s, 1)
	// Two calls at once: one takes the waiting sandbox, one runs cold.
	done := make(chan struct{}, 2)
	for i := 0; i < 2; i++ {
		go func() {
			call(t, context.Background(), cs, map[string]any{"expression": "barrier"})
			done <- struct{}{}
		}()
	}
	<-f.started
	<-f.started
	start := time.Now()
	time.Sleep(150 * time.Millisecond) // a refill would launch here
	end := time.Now()
	f.mu.Lock()
	if !slices.ContainsFunc(f.launches, func(l launch) bool { return strings.Contains(l.id, "calculator") }) {
		t.Errorf("no calculator launch recorded (the filter below would see none): %v", f.launches)
	}
	for _, l := range f.launches {
		// The other example skills' pools fill on their own.
		if strings.Contains(l.id, "calculator") && l.at.After(start) && l.at.Before(end) {
			t.Errorf("a calculator sandbox (%s) was launched during the calls", l.id)
		}
	}
	f.mu.Unlock()
	released := time.Now()
	f.release <- struct{}{}
	f.release <- struct{}{}
	<-done
	<-done
	if st := s.PoolStats()["calculator"]; st[0] < 1 {
		t.Errorf("no call was warm: %v", st)
	}
	waitReady(t, s, 1) // and the pool refills after them
	// Not at once: answerGrace after the last answer (its client reads it
	// meanwhile), although the pool is empty.
	s.mu.Lock()
	p := s.served["calculator"].pool
	s.mu.Unlock()
	p.mu.Lock()
	lastEnd := p.lastEnd
	p.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.launches {
		if strings.Contains(l.id, "calculator") && l.at.After(released) {
			if d := l.at.Sub(lastEnd); d < 10*time.Millisecond {
				t.Errorf("the refill launched %s after the last call's answer, want 10ms at least", d)
			}
			return
		}
	}
	t.Error("no calculator launch recorded after the calls")
}
