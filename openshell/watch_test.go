package openshell

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/skillrun/skillrun/openshell/computev1"
	"github.com/skillrun/skillrun/runtime/fake"
)

// eventString is an event as "ID condition" or "ID deleted"; a sandbox
// event with a spec is marked (watch events carry none).
func eventString(ev *pb.WatchSandboxesEvent) string {
	switch {
	case ev.GetSandbox() != nil:
		sb := ev.GetSandbox().GetSandbox()
		s := sb.GetId() + " " + condition(sb)
		if sb.GetSpec() != nil {
			s += " WITH SPEC"
		}
		if sb.GetStatus().GetInstanceId() != "" && sb.GetStatus().GetInstanceId() != ContainerID(sb.GetId()) {
			s += " instance " + sb.GetStatus().GetInstanceId()
		}
		return s
	case ev.GetDeleted() != nil:
		return ev.GetDeleted().GetSandboxId() + " deleted"
	}
	return fmt.Sprintf("unexpected event %v", ev)
}

// watcher collects the events of one WatchSandboxes stream.
type watcher struct {
	events chan string
	done   chan error
}

// watchGRPC opens a WatchSandboxes stream over c.
func watchGRPC(t *testing.T, c pb.ComputeDriverClient) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	t.Cleanup(cancel)
	stream, err := c.WatchSandboxes(ctx, &pb.WatchSandboxesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	w := &watcher{events: make(chan string, 1000), done: make(chan error, 1)}
	go func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				w.done <- err
				return
			}
			w.events <- eventString(ev)
		}
	}()
	return w
}

// next returns the next n events.
func (w *watcher) next(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		select {
		case ev := <-w.events:
			out = append(out, ev)
		case err := <-w.done:
			t.Fatalf("stream ended after %q: %v", out, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("got %q, waited in vain for %d events", out, n-len(out))
		}
	}
	return out
}

func (w *watcher) want(t *testing.T, want ...string) {
	t.Helper()
	if got := w.next(t, len(want)); !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n %q\nwant\n %q", got, want)
	}
}

// none checks that no event arrives for a while.
func (w *watcher) none(t *testing.T) {
	t.Helper()
	select {
	case ev := <-w.events:
		t.Fatalf("unexpected event %q", ev)
	case <-time.After(150 * time.Millisecond):
	}
}

// TestWatchOrder: every state the driver's mutations pass through reaches
// every stream, in order, once.
func TestWatchOrder(t *testing.T) {
	d := newDriver(t, testConfig(t, fake.New()))
	c := serve(t, d)
	ctx := testCtx(t)
	create(t, d, "a")
	// The first look: the existing sandbox (this also tells the stream is
	// subscribed). One stream after the other: the looks of two streams at
	// the same time can make one skip a sandbox the other is looking at
	// (see TestWatchSkipsLockedSandbox).
	w1 := watchGRPC(t, c)
	w1.want(t, "a "+condReady)
	w2 := watchGRPC(t, c)
	w2.want(t, "a "+condReady)

	create(t, d, "b")
	if _, err := c.StopSandbox(ctx, &pb.StopSandboxRequest{SandboxId: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartSandbox(ctx, &pb.StartSandboxRequest{SandboxId: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteSandbox(ctx, &pb.DeleteSandboxRequest{SandboxId: "b"}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"b " + condProvisioned,
		"b " + condReady,
		"b " + condStopped,
		"b " + condReady,
		"b " + condDeleting,
		"b deleted",
	}
	w1.want(t, want...)
	w2.want(t, want...)
	// Requests that change nothing send nothing.
	if _, err := c.StartSandbox(ctx, &pb.StartSandboxRequest{SandboxId: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteSandbox(ctx, &pb.DeleteSandboxRequest{SandboxId: "b"}); err != nil {
		t.Fatal(err)
	}
	w1.none(t)
}

// TestWatchFailedCreate: a create that fails shows as Starting, then
// deleted.
func TestWatchFailedCreate(t *testing.T) {
	d := newDriver(t, testConfig(t, fake.New()))
	c := serve(t, d)
	create(t, d, "a")
	w := watchGRPC(t, c)
	w.want(t, "a "+condReady)
	sb := newSandbox("broken")
	sb.Spec.Template.Image = brokenImage
	if _, err := d.CreateSandbox(testCtx(t), &pb.CreateSandboxRequest{Sandbox: sb}); err == nil {
		t.Fatal("create of a broken image succeeded")
	}
	w.want(t, "broken "+condProvisioned, "broken deleted")
	// A refused create (validation) sends nothing.
	_, err := d.CreateSandbox(testCtx(t), &pb.CreateSandboxRequest{Sandbox: &pb.DriverSandbox{Id: "x"}})
	wantCode(t, err, codes.InvalidArgument, "sandbox.name: is required")
	// Nor does a create of an existing sandbox.
	_, err = d.CreateSandbox(testCtx(t), &pb.CreateSandboxRequest{Sandbox: newSandbox("a")})
	wantCode(t, err, codes.AlreadyExists, "sandbox a already exists")
	w.none(t)
}

// TestWatchLateSubscriber: a stream that subscribes after the fact gets
// one snapshot of every sandbox, in ID order, without specs, and nothing
// of the sandboxes deleted before.
func TestWatchLateSubscriber(t *testing.T) {
	rt := fake.New()
	d := newDriver(t, testConfig(t, rt))
	c := serve(t, d)
	ctx := testCtx(t)
	for _, id := range []string{"e", "d", "c", "b", "a"} {
		create(t, d, id)
	}
	if _, err := d.StopSandbox(ctx, &pb.StopSandboxRequest{SandboxId: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DeleteSandbox(ctx, &pb.DeleteSandboxRequest{SandboxId: "c"}); err != nil {
		t.Fatal(err)
	}
	rt.Kill(ctx, ContainerID("d"), syscall.SIGKILL, false)
	rt.Pause(ctx, ContainerID("e"))
	w := watchGRPC(t, c)
	w.want(t, "a "+condReady, "b "+condStopped, "d "+condExited, "e "+condPaused)
	w.none(t)
}

// TestWatchSkipsLockedSandbox: a look skips a sandbox a mutation holds
// (the mutation publishes its own states), so a stream's first snapshot
// lacks it until a later look: the next poll, or a wake-up (notify). A
// sandbox another stream is looking at (its read lock) is not skipped:
// streams never hide sandboxes from each other.
func TestWatchSkipsLockedSandbox(t *testing.T) {
	d := newDriver(t, testConfig(t, fake.New()))
	c := serve(t, d)
	create(t, d, "a")
	create(t, d, "b")
	unlock := d.lock("a")
	w := watchGRPC(t, c)
	w.want(t, "b "+condReady)
	w.none(t)
	unlock()
	d.notify()
	w.want(t, "a "+condReady)
	w.none(t)

	runlock, ok := d.tryRLock("a")
	if !ok {
		t.Fatal("a is locked")
	}
	defer runlock()
	w2 := watchGRPC(t, c)
	w2.want(t, "a "+condReady, "b "+condReady)
	w2.none(t)
}

// TestWatchStreamsDoNotHideEachOther: many streams opened at once, with
// fast polling, each get every sandbox in their first snapshot.
func TestWatchStreamsDoNotHideEachOther(t *testing.T) {
	cfg := testConfig(t, fake.New())
	cfg.PollInterval = time.Millisecond
	d := newDriver(t, cfg)
	c := serve(t, d)
	for _, id := range []string{"a", "b", "c"} {
		create(t, d, id)
	}
	var ws []*watcher
	for range 8 {
		ws = append(ws, watchGRPC(t, c))
	}
	for _, w := range ws {
		w.want(t, "a "+condReady, "b "+condReady, "c "+condReady)
	}
}

// TestWatchExternalChanges: changes nobody announced (the container
// exits, is paused, vanishes; the sandbox's directory vanishes) are seen
// by polling.
func TestWatchExternalChanges(t *testing.T) {
	rt := fake.New()
	cfg := testConfig(t, rt)
	cfg.PollInterval = 20 * time.Millisecond
	d := newDriver(t, cfg)
	c := serve(t, d)
	ctx := testCtx(t)
	create(t, d, "a")
	w := watchGRPC(t, c)
	w.want(t, "a "+condReady)
	rt.Pause(ctx, ContainerID("a"))
	w.want(t, "a "+condPaused)
	rt.Resume(ctx, ContainerID("a"))
	w.want(t, "a "+condReady)
	rt.Kill(ctx, ContainerID("a"), syscall.SIGKILL, false)
	w.want(t, "a "+condExited)
	rt.Delete(ctx, ContainerID("a"), true)
	w.want(t, "a "+condMissing)
	os.RemoveAll(d.sandboxDir("a"))
	w.want(t, "a deleted")
	w.none(t)
}

// TestWatchConcurrent: sandboxes changed concurrently, with a stream
// polling fast: each sandbox's events arrive in the order of its
// mutations, each once.
func TestWatchConcurrent(t *testing.T) {
	cfg := testConfig(t, fake.New())
	cfg.PollInterval = 5 * time.Millisecond
	d := newDriver(t, cfg)
	c := serve(t, d)
	ctx := testCtx(t)
	create(t, d, "sync")
	w := watchGRPC(t, c)
	w.want(t, "sync "+condReady)
	const n = 4
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		wg.Go(func() {
			if _, err := c.CreateSandbox(ctx, &pb.CreateSandboxRequest{Sandbox: newSandbox(id)}); err != nil {
				errs <- err
				return
			}
			if _, err := c.StopSandbox(ctx, &pb.StopSandboxRequest{SandboxId: id}); err != nil {
				errs <- err
				return
			}
			if _, err := c.StartSandbox(ctx, &pb.StartSandboxRequest{SandboxId: id}); err != nil {
				errs <- err
				return
			}
			if _, err := c.DeleteSandbox(ctx, &pb.DeleteSandboxRequest{SandboxId: id}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	per := map[string][]string{}
	for _, ev := range w.next(t, n*6) {
		id, rest, _ := strings.Cut(ev, " ")
		per[id] = append(per[id], rest)
	}
	want := []string{condProvisioned, condReady, condStopped, condReady, condDeleting, "deleted"}
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		if !reflect.DeepEqual(per[id], want) {
			t.Errorf("%s: events\n %q\nwant\n %q", id, per[id], want)
		}
	}
	w.none(t)
}

// TestWatchEnds: the watch loop returns nil when the stream's context
// ends, the send error when a send fails, Internal when the state
// directory cannot be read; and unsubscribes in every case.
func TestWatchEnds(t *testing.T) {
	d := newDriver(t, testConfig(t, fake.New()))
	create(t, d, "a")
	unsubscribed := func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.watchers) == 0
	}

	ctx, cancel := context.WithCancel(context.Background())
	var sent []string
	done := make(chan error, 1)
	go func() {
		done <- d.watch(ctx, func(ev *pb.WatchSandboxesEvent) error {
			sent = append(sent, eventString(ev))
			cancel()
			return nil
		})
	}()
	select {
	case err := <-done:
		if err != nil || !reflect.DeepEqual(sent, []string{"a " + condReady}) {
			t.Errorf("watch after cancel: %v, sent %q", err, sent)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not end with its context")
	}
	if !unsubscribed() {
		t.Error("a watcher stayed subscribed")
	}

	err := d.watch(context.Background(), func(*pb.WatchSandboxesEvent) error { return errBoom })
	if err != errBoom || !unsubscribed() {
		t.Errorf("watch with a failing send: %v", err)
	}

	if err := os.RemoveAll(d.sandboxesDir()); err != nil {
		t.Fatal(err)
	}
	msg := "list sandboxes: open " + d.sandboxesDir() + ": no such file or directory"
	err = d.watch(context.Background(), func(*pb.WatchSandboxesEvent) error { return nil })
	wantCode(t, err, codes.Internal, msg)
	if !unsubscribed() {
		t.Error("a watcher stayed subscribed")
	}
	// The other readers of the directory answer the same.
	_, err = d.ListSandboxes(context.Background(), &pb.ListSandboxesRequest{})
	wantCode(t, err, codes.Internal, msg)
	_, err = d.GetSandbox(context.Background(), &pb.GetSandboxRequest{SandboxName: "a"})
	wantCode(t, err, codes.Internal, msg)
	_, err = d.DeleteWorkspace(context.Background(), &pb.DeleteWorkspaceRequest{Workspace: "ws"})
	wantCode(t, err, codes.Internal, msg)
}
