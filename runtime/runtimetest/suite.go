// Package runtimetest is the conformance suite every runtime.Runtime back
// end runs (the fake in unit tests, libcontainer as root, Seatbelt on a
// Mac): the OCI state machine, runc's error sentences and ID validation,
// seen through the engine interface.
package runtimetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skillrun/skillrun/runtime"
)

// Harness supplies what the suite needs from a back end.
type Harness struct {
	// New returns a runtime with a fresh, private state root.
	New func(t *testing.T) runtime.Runtime
	// Bundle returns a bundle directory whose process runs args.
	Bundle func(t *testing.T, args ...string) string
	// Processes is true when the back end runs real processes (so exit
	// statuses and the init's death are observable).
	Processes bool
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("Lifecycle", func(t *testing.T) { lifecycle(t, h) })
	t.Run("Errors", func(t *testing.T) { errorsSuite(t, h) })
	t.Run("ConcurrentCreate", func(t *testing.T) { concurrentCreate(t, h) })
	if h.Processes {
		t.Run("RunExitStatus", func(t *testing.T) { runExit(t, h) })
	}
}

func lifecycle(t *testing.T, h Harness) {
	ctx := context.Background()
	rt := h.New(t)
	b := h.Bundle(t, "sleep", "30")
	id := "life"
	if err := rt.Create(ctx, id, runtime.CreateOpts{Bundle: b}); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = rt.Delete(ctx, id, true) })
	st := mustState(t, rt, id, runtime.StatusCreated)
	if st.Pid <= 0 || st.ID != id || st.Bundle == "" {
		t.Fatalf("created state incomplete: %+v", st)
	}
	list, _, err := rt.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("list = %+v, %v; want exactly %s", list, err, id)
	}
	if err := rt.Start(ctx, id); err != nil {
		t.Fatalf("start: %v", err)
	}
	mustState(t, rt, id, runtime.StatusRunning)
	if err := rt.Start(ctx, id); err == nil {
		t.Fatal("second start succeeded")
	}
	if err := rt.Delete(ctx, id, false); err == nil || !strings.Contains(err.Error(), "not stopped") {
		t.Fatalf("delete of a running container without force: %v", err)
	}
	if err := rt.Kill(ctx, id, syscall.SIGKILL, false); err != nil {
		t.Fatalf("kill: %v", err)
	}
	waitStopped(t, rt, id)
	if err := rt.Kill(ctx, id, syscall.SIGKILL, false); !errors.Is(err, runtime.ErrNotRunning) {
		t.Fatalf("kill of a stopped container = %v, want %v", err, runtime.ErrNotRunning)
	}
	if err := rt.Kill(ctx, id, syscall.SIGKILL, true); err != nil {
		t.Fatalf("kill --all of a stopped container = %v, want nil (runc)", err)
	}
	if err := rt.Delete(ctx, id, false); err != nil {
		t.Fatalf("delete stopped: %v", err)
	}
	if _, err := rt.State(ctx, id); !errors.Is(err, runtime.ErrNotExist) {
		t.Fatalf("state after delete = %v, want ErrNotExist", err)
	}
	if err := rt.Delete(ctx, id, true); err != nil {
		t.Fatalf("delete --force of a missing container = %v, want nil (runc)", err)
	}
}

func errorsSuite(t *testing.T, h Harness) {
	ctx := context.Background()
	rt := h.New(t)
	for _, id := range []string{"a/b", "..", strings.Repeat("x", 1024), "héllo", ""} {
		if err := rt.Create(ctx, id, runtime.CreateOpts{Bundle: h.Bundle(t, "true")}); !errors.Is(err, runtime.ErrInvalidID) {
			t.Errorf("create %q = %v, want ErrInvalidID", id, err)
		}
	}
	if list, _, _ := rt.List(ctx); len(list) != 0 {
		t.Errorf("bad IDs left containers behind: %+v", list)
	}
	for name, call := range map[string]func() error{
		"state":  func() error { _, err := rt.State(ctx, "nope"); return err },
		"start":  func() error { return rt.Start(ctx, "nope") },
		"kill":   func() error { return rt.Kill(ctx, "nope", syscall.SIGTERM, false) },
		"delete": func() error { return rt.Delete(ctx, "nope", false) },
		"pause":  func() error { return rt.Pause(ctx, "nope") },
	} {
		err := call()
		if !errors.Is(err, runtime.ErrNotExist) && !errors.Is(err, runtime.ErrNotSupported) {
			t.Errorf("%s of a missing container = %v, want %q", name, err, runtime.ErrNotExist)
		} else if errors.Is(err, runtime.ErrNotExist) && !strings.Contains(err.Error(), "container does not exist") {
			t.Errorf("%s: wording %q lacks runc's %q", name, err, "container does not exist")
		}
	}
	b := h.Bundle(t, "sleep", "30")
	if err := rt.Create(ctx, "dup", runtime.CreateOpts{Bundle: b}); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = rt.Delete(ctx, "dup", true) })
	err := rt.Create(ctx, "dup", runtime.CreateOpts{Bundle: b})
	if !errors.Is(err, runtime.ErrExist) || !strings.Contains(err.Error(), "container with given ID already exists") {
		t.Fatalf("duplicate create = %v", err)
	}
	mustState(t, rt, "dup", runtime.StatusCreated)
}

func concurrentCreate(t *testing.T, h Harness) {
	ctx := context.Background()
	rt := h.New(t)
	b := h.Bundle(t, "sleep", "30")
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = rt.Create(ctx, "race", runtime.CreateOpts{Bundle: b})
		}()
	}
	wg.Wait()
	t.Cleanup(func() { _ = rt.Delete(ctx, "race", true) })
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, runtime.ErrExist):
			t.Errorf("losing create failed with %v, want %v", err, runtime.ErrExist)
		}
	}
	if ok != 1 {
		t.Fatalf("%d creates of one ID succeeded, want exactly 1", ok)
	}
	mustState(t, rt, "race", runtime.StatusCreated)
}

func runExit(t *testing.T, h Harness) {
	ctx := context.Background()
	rt := h.New(t)
	var info runtime.ExitInfo
	var started []int
	status, err := rt.Run(ctx, "exit3", runtime.RunOpts{CreateOpts: runtime.CreateOpts{Bundle: h.Bundle(t, "sh", "-c", "exit 3")}, Exit: &info,
		Started: func(pid int) { started = append(started, pid) }})
	if err != nil || status != 3 || info.Status != 3 {
		t.Fatalf("run exit 3 = %d (%+v), %v", status, info, err)
	}
	if len(started) != 1 || started[0] <= 0 {
		t.Fatalf("Started called with %v, want once with the process' PID", started)
	}
	if _, err := rt.State(ctx, "exit3"); !errors.Is(err, runtime.ErrNotExist) {
		t.Fatalf("run without keep left the container: %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	begin := time.Now()
	var aliveErr error = errors.New("Started not called")
	status, err = rt.Run(tctx, "timeout", runtime.RunOpts{CreateOpts: runtime.CreateOpts{Bundle: h.Bundle(t, "sleep", "30")},
		// The process is running when Started is called: signal 0 reaches it.
		Started: func(pid int) { aliveErr = syscall.Kill(pid, 0) }})
	if !errors.Is(err, context.DeadlineExceeded) || status != 128+int(syscall.SIGKILL) {
		t.Fatalf("run past its deadline = %d, %v; want 137 and DeadlineExceeded", status, err)
	}
	if aliveErr != nil {
		t.Fatalf("container process at Started: %v", aliveErr)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("killing on deadline took %v", d)
	}
}

func mustState(t *testing.T, rt runtime.Runtime, id, want string) *runtime.State {
	t.Helper()
	st, err := rt.State(context.Background(), id)
	if err != nil {
		t.Fatalf("state %s: %v", id, err)
	}
	if st.Status != want {
		t.Fatalf("state %s = %s, want %s", id, st.Status, want)
	}
	return st
}

func waitStopped(t *testing.T, rt runtime.Runtime, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		st, err := rt.State(context.Background(), id)
		if err == nil && st.Status == runtime.StatusStopped {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not stop", id)
}
