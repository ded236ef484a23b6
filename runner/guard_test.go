package runner

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/spec"
)

// guardedRT is a fake back end with a lifetime guard that records what
// the runner asks of it, and what existed when.
type guardedRT struct {
	*fakeRT
	mu       sync.Mutex
	events   []string
	id       string
	opts     runtime.GuardOpts
	deadline time.Time
	// bundleAtGuard and bundleAtRelease: whether the bundle folder
	// existed when Guard and Release were called.
	bundleAtGuard, bundleAtReady, bundleAtRelease bool
	fail                                          error
}

func (g *guardedRT) Guard(id string, o runtime.GuardOpts) (runtime.Guard, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fail != nil {
		return nil, g.fail
	}
	g.events = append(g.events, "guard")
	g.id, g.opts = id, o
	if len(o.Remove) == 1 {
		_, err := os.Lstat(o.Remove[0])
		g.bundleAtGuard = err == nil
	}
	return &fakeGuard{g: g}, nil
}

type fakeGuard struct{ g *guardedRT }

func (f *fakeGuard) SetDeadline(t time.Time) error {
	f.g.mu.Lock()
	defer f.g.mu.Unlock()
	f.g.events = append(f.g.events, "deadline")
	f.g.deadline = t
	return nil
}

func (f *fakeGuard) Ready() error {
	f.g.mu.Lock()
	defer f.g.mu.Unlock()
	f.g.events = append(f.g.events, "ready")
	if len(f.g.opts.Remove) == 1 {
		_, err := os.Lstat(f.g.opts.Remove[0])
		f.g.bundleAtReady = err == nil
	}
	return nil
}

func (f *fakeGuard) Release() {
	f.g.mu.Lock()
	defer f.g.mu.Unlock()
	f.g.events = append(f.g.events, "release")
	if len(f.g.opts.Remove) == 1 {
		_, err := os.Lstat(f.g.opts.Remove[0])
		f.g.bundleAtRelease = err == nil
	}
}

func (g *guardedRT) Run(ctx context.Context, id string, opts runtime.RunOpts) (int, error) {
	g.mu.Lock()
	g.events = append(g.events, "run")
	g.mu.Unlock()
	return g.fakeRT.Run(ctx, id, opts)
}

// TestRunGuarded: a cold run is guarded before anything of it exists,
// with its bundle folder and owner file; the guard's deadline is the
// wall-clock limit plus guardGrace from the launch; the guard is released
// once everything is removed.
func TestRunGuarded(t *testing.T) {
	rt := &guardedRT{fakeRT: &fakeRT{behave: exited(`{"result": 4}`+"\n", "", 0, true)}}
	start := time.Now()
	res, err := runJSON(context.Background(), rt, load(t, "calculator"), []byte(`{"expression": "2+2"}`),
		Options{Grants: spec.Grants{Timeout: 7 * time.Second}, TempDir: t.TempDir()})
	if err != nil || !res.OK {
		t.Fatalf("run: %+v, %v", res, err)
	}
	if got := strings.Join(rt.events, ","); got != "guard,ready,deadline,run,release" {
		t.Errorf("events = %v, want guard, ready, deadline, run, release", got)
	}
	if rt.id != rt.ids[0] {
		t.Errorf("guarded %q, ran %q", rt.id, rt.ids[0])
	}
	if len(rt.opts.Remove) != 1 || rt.opts.Remove[0] != rt.bundles[0] || rt.opts.Lock != rt.bundles[0]+ownerSuffix {
		t.Errorf("guard opts %+v, bundle %s", rt.opts, rt.bundles[0])
	}
	if rt.bundleAtGuard || rt.bundleAtReady {
		t.Error("the bundle folder existed before the guard was in place")
	}
	if rt.bundleAtRelease {
		t.Error("the guard was released before the bundle folder was removed")
	}
	want := start.Add(7*time.Second + guardGrace)
	if d := rt.deadline.Sub(want); d < 0 || d > time.Second {
		t.Errorf("deadline %s after the start, want %s", rt.deadline.Sub(start), 7*time.Second+guardGrace)
	}
}

// TestRunGuardFails: a guard that cannot be had fails the run before
// anything runs or is left.
func TestRunGuardFails(t *testing.T) {
	tmp := t.TempDir()
	rt := &guardedRT{fakeRT: &fakeRT{behave: exited("{}", "", 0, true)}, fail: errors.New("no guard")}
	_, err := runJSON(context.Background(), rt, load(t, "calculator"), []byte(`{"expression": "1"}`), Options{TempDir: tmp})
	if err == nil || rt.runs != 0 {
		t.Fatalf("err %v, runs %d: want an error and no run", err, rt.runs)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left in TMPDIR: %v", ents)
	}
}

// TestOutcomeKilledAtLimitByGuard: a sandbox SIGKILLed at or after its
// wall-clock limit, not by this process' timer (the guard's backstop when
// the runner was stopped or starved), is a timeout; before the limit it
// is a signal.
func TestOutcomeKilledAtLimitByGuard(t *testing.T) {
	for _, tc := range []struct {
		wall time.Duration
		want string
	}{{5 * time.Second, StoppedTimeout}, {5*time.Second + guardGrace, StoppedTimeout}, {4 * time.Second, StoppedSignal}} {
		c := &container{
			plan:   &plan{sk: &spec.Skill{Name: "x"}, policy: &spec.Policy{Timeout: 5 * time.Second, Output: 1 << 20}},
			runCtx: context.Background(),
			stdout: &capWriter{limit: 1 << 20}, stderr: &capWriter{limit: 1 << 20},
			info: runtime.ExitInfo{Status: 137, Signal: syscall.SIGKILL, Cgroups: true},
		}
		res, err := c.outcome(context.Background(), tc.wall, 137, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.StoppedReason != tc.want {
			t.Errorf("SIGKILL at %s: stopped_reason %q, want %q", tc.wall, res.StoppedReason, tc.want)
		}
	}
}
