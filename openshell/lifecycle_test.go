package openshell

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/skillrun/skillrun/openshell/computev1"
	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/fake"
)

// getCond is the Ready condition GetSandbox reports for id.
func getCond(t *testing.T, d *Driver, id string) string {
	t.Helper()
	g, err := d.GetSandbox(context.Background(), &pb.GetSandboxRequest{SandboxId: id})
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return condition(g.GetSandbox())
}

func create(t *testing.T, d *Driver, id string) {
	t.Helper()
	if _, err := d.CreateSandbox(context.Background(), &pb.CreateSandboxRequest{Sandbox: newSandbox(id)}); err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
}

// wantNothingLeft checks that sandbox id has no directory and no
// container.
func wantNothingLeft(t *testing.T, d *Driver, rt runtime.Runtime, id string) {
	t.Helper()
	if _, err := os.Lstat(d.sandboxDir(id)); !os.IsNotExist(err) {
		t.Errorf("sandbox directory of %s: %v", id, err)
	}
	if st, err := rt.State(context.Background(), ContainerID(id)); err != runtime.ErrNotExist {
		t.Errorf("container of %s: %+v, %v", id, st, err)
	}
}

// TestCreateFailures: a create whose image cannot be unpacked, or whose
// container does not start, answers Internal and leaves nothing behind.
func TestCreateFailures(t *testing.T) {
	rt := &hookedRuntime{Runtime: fake.New()}
	d := newDriver(t, testConfig(t, rt))
	ctx := testCtx(t)

	sb := newSandbox("broken")
	sb.Spec.Template.Image = brokenImage
	_, err := d.CreateSandbox(ctx, &pb.CreateSandboxRequest{Sandbox: sb})
	if status.Code(err) != codes.Internal || !strings.HasPrefix(status.Convert(err).Message(), "create sandbox broken: unpack image broken:1: ") {
		t.Fatalf("create of a broken image: %v", err)
	}
	wantNothingLeft(t, d, rt, "broken")

	rt.set(func(r *hookedRuntime) { r.runErr = errBoom })
	_, err = d.CreateSandbox(ctx, &pb.CreateSandboxRequest{Sandbox: newSandbox("norun")})
	wantCode(t, err, codes.Internal, "create sandbox norun: start container openshell-norun: boom")
	wantNothingLeft(t, d, rt, "norun")
	rt.set(func(r *hookedRuntime) { r.runErr = nil })

	// The failed IDs can be created afterwards.
	create(t, d, "norun")
	if got := getCond(t, d, "norun"); got != condReady {
		t.Errorf("norun after a retry: %s", got)
	}
}

// TestCreateReplacesLeftoverContainer: a container with the sandbox's ID
// that is not running (left by someone else) is removed before the
// sandbox's own starts.
func TestCreateReplacesLeftoverContainer(t *testing.T) {
	rt := fake.New()
	d := newDriver(t, testConfig(t, rt))
	ctx := testCtx(t)
	if err := rt.Create(ctx, ContainerID("left"), runtime.CreateOpts{Bundle: "/elsewhere", Spec: baseSpec()}); err != nil {
		t.Fatal(err)
	}
	create(t, d, "left")
	st, err := rt.State(ctx, ContainerID("left"))
	if err != nil || st.Status != runtime.StatusRunning || st.Bundle != d.bundleDir("left") {
		t.Errorf("container %+v, %v", st, err)
	}
}

// TestStartSandbox: Start re-creates an exited container, refuses a
// sandbox being deleted or created, and reports a runtime failure.
func TestStartSandbox(t *testing.T) {
	rt := &hookedRuntime{Runtime: fake.New()}
	d := newDriver(t, testConfig(t, rt))
	ctx := testCtx(t)
	create(t, d, "s")

	// The container exits by itself: the sandbox is not stopped, its
	// container is.
	if err := rt.Kill(ctx, ContainerID("s"), syscall.SIGKILL, false); err != nil {
		t.Fatal(err)
	}
	if got := getCond(t, d, "s"); got != condExited {
		t.Errorf("after the container exited: %s", got)
	}
	mark := len(rt.Calls)
	if _, err := d.StartSandbox(ctx, &pb.StartSandboxRequest{SandboxId: "s"}); err != nil {
		t.Fatal(err)
	}
	if got := rt.Calls[mark:]; !reflect.DeepEqual(got, []string{"delete openshell-s", "create openshell-s", "start openshell-s"}) {
		t.Errorf("start of an exited container: runtime calls %q", got)
	}
	if got := getCond(t, d, "s"); got != condReady {
		t.Errorf("after start: %s", got)
	}

	// The runtime fails: Internal, and a stopped sandbox stays stopped.
	if _, err := d.StopSandbox(ctx, &pb.StopSandboxRequest{SandboxId: "s"}); err != nil {
		t.Fatal(err)
	}
	rt.set(func(r *hookedRuntime) { r.runErr = errBoom })
	_, err := d.StartSandbox(ctx, &pb.StartSandboxRequest{SandboxId: "s"})
	wantCode(t, err, codes.Internal, "start sandbox s: start container openshell-s: boom")
	if got := getCond(t, d, "s"); got != condStopped {
		t.Errorf("after a failed start: %s", got)
	}
	rt.set(func(r *hookedRuntime) { r.runErr = nil })

	// A sandbox whose creation is unfinished, or whose deletion began.
	for _, tc := range []struct {
		mod  func(*record)
		cond string
	}{
		{func(r *record) { r.Ready = false }, condProvisioned},
		{func(r *record) { r.Deleting = true }, condDeleting},
	} {
		rec, err := d.readRecord("s")
		if err != nil {
			t.Fatal(err)
		}
		saved := *rec
		tc.mod(rec)
		if err := d.writeRecord("s", rec); err != nil {
			t.Fatal(err)
		}
		_, err = d.StartSandbox(ctx, &pb.StartSandboxRequest{SandboxId: "s"})
		wantCode(t, err, codes.FailedPrecondition, "sandbox s is being created or deleted")
		if got := getCond(t, d, "s"); got != tc.cond {
			t.Errorf("condition %s, want %s", got, tc.cond)
		}
		if err := d.writeRecord("s", &saved); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStopSandbox: Stop of a paused container, of one that ignores
// SIGTERM (killed after StopTimeout), when the caller gives up (the record
// is put back: it never says Stopped while the container runs), and of a
// sandbox being deleted.
func TestStopSandbox(t *testing.T) {
	rt := &hookedRuntime{Runtime: fake.New()}
	cfg := testConfig(t, rt)
	cfg.StopTimeout = 200 * time.Millisecond
	d := newDriver(t, cfg)
	ctx := testCtx(t)

	create(t, d, "p")
	if err := rt.Pause(ctx, ContainerID("p")); err != nil {
		t.Fatal(err)
	}
	if got := getCond(t, d, "p"); got != condPaused {
		t.Errorf("paused: %s", got)
	}
	if _, err := d.StopSandbox(ctx, &pb.StopSandboxRequest{SandboxId: "p"}); err != nil {
		t.Fatal(err)
	}
	if got := getCond(t, d, "p"); got != condStopped {
		t.Errorf("after stopping a paused sandbox: %s", got)
	}
	// Start leaves a paused container alone.
	if _, err := d.StartSandbox(ctx, &pb.StartSandboxRequest{SandboxId: "p"}); err != nil {
		t.Fatal(err)
	}
	rt.Pause(ctx, ContainerID("p"))
	mark := len(rt.Calls)
	if _, err := d.StartSandbox(ctx, &pb.StartSandboxRequest{SandboxId: "p"}); err != nil {
		t.Fatal(err)
	}
	if got := rt.Calls[mark:]; len(got) != 0 {
		t.Errorf("start of a paused sandbox: runtime calls %q", got)
	}
	if got := getCond(t, d, "p"); got != condPaused {
		t.Errorf("after start of a paused sandbox: %s", got)
	}

	rt.set(func(r *hookedRuntime) { r.ignoreSIGTERM = true })
	create(t, d, "stubborn")
	start := time.Now()
	if _, err := d.StopSandbox(ctx, &pb.StopSandboxRequest{SandboxId: "stubborn"}); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < cfg.StopTimeout {
		t.Errorf("stop of a container ignoring SIGTERM took %v, want at least %v", el, cfg.StopTimeout)
	}
	if _, err := rt.State(ctx, ContainerID("stubborn")); err != runtime.ErrNotExist {
		t.Errorf("stubborn container after stop: %v", err)
	}

	// The caller gives up while Stop waits: Internal with the context's
	// error; the container still runs, and the record does not say
	// stopped (it did before the stop was undone).
	create(t, d, "gaveup")
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := d.StopSandbox(short, &pb.StopSandboxRequest{SandboxId: "gaveup"})
	wantCode(t, err, codes.Internal, "stop sandbox gaveup: context deadline exceeded")
	if rec, err := d.readRecord("gaveup"); err != nil || rec.Stopped {
		t.Errorf("record after a cancelled stop: %+v, %v", rec, err)
	}
	if got := getCond(t, d, "gaveup"); got != condReady {
		t.Errorf("after a cancelled stop: %s", got)
	}
	rt.set(func(r *hookedRuntime) { r.ignoreSIGTERM = false })

	rec, _ := d.readRecord("gaveup")
	rec.Deleting = true
	d.writeRecord("gaveup", rec)
	_, err = d.StopSandbox(ctx, &pb.StopSandboxRequest{SandboxId: "gaveup"})
	wantCode(t, err, codes.FailedPrecondition, "sandbox gaveup is being deleted")
}

// TestDeleteFailure: a runtime that cannot delete the container makes
// Delete answer Internal; the sandbox stays, marked deleting, and a
// later Delete finishes it.
func TestDeleteFailure(t *testing.T) {
	rt := &hookedRuntime{Runtime: fake.New()}
	d := newDriver(t, testConfig(t, rt))
	ctx := testCtx(t)
	create(t, d, "x")
	rt.set(func(r *hookedRuntime) { r.deleteErr = errBoom })
	_, err := d.DeleteSandbox(ctx, &pb.DeleteSandboxRequest{SandboxId: "x"})
	wantCode(t, err, codes.Internal, "delete sandbox x: boom")
	if got := getCond(t, d, "x"); got != condDeleting {
		t.Errorf("after a failed delete: %s", got)
	}
	rt.set(func(r *hookedRuntime) { r.deleteErr = nil })
	del, err := d.DeleteSandbox(ctx, &pb.DeleteSandboxRequest{SandboxId: "x"})
	if err != nil || !del.GetDeleted() {
		t.Fatalf("second delete: %v, %v", del, err)
	}
	wantNothingLeft(t, d, rt, "x")
}

// TestSnapshotCreatedContainer: a container that exists but was never
// started reports Starting with its runtime status.
func TestSnapshotCreatedContainer(t *testing.T) {
	rt := fake.New()
	d := newDriver(t, testConfig(t, rt))
	ctx := testCtx(t)
	create(t, d, "c")
	rt.Delete(ctx, ContainerID("c"), true)
	if err := rt.Create(ctx, ContainerID("c"), runtime.CreateOpts{Bundle: d.bundleDir("c")}); err != nil {
		t.Fatal(err)
	}
	if got := getCond(t, d, "c"); got != condCreated {
		t.Errorf("created container: %s", got)
	}
}

// TestRestartReconcile: a new Driver over the same state directory and
// runtime keeps the finished sandboxes (whatever became of their
// containers), removes unfinished creates and deletes and unreadable
// records, and deletes containers named like a sandbox that has none.
func TestRestartReconcile(t *testing.T) {
	rt := fake.New()
	cfg := testConfig(t, rt)
	d1 := newDriver(t, cfg)
	ctx := testCtx(t)
	for _, id := range []string{"keep", "gone", "stopped", "half", "del"} {
		create(t, d1, id)
	}
	if _, err := d1.StopSandbox(ctx, &pb.StopSandboxRequest{SandboxId: "stopped"}); err != nil {
		t.Fatal(err)
	}
	// The container of "gone" vanished behind the driver's back.
	if err := rt.Delete(ctx, ContainerID("gone"), true); err != nil {
		t.Fatal(err)
	}
	// "half" is a create that did not finish, "del" a delete.
	for id, mod := range map[string]func(*record){"half": func(r *record) { r.Ready = false }, "del": func(r *record) { r.Deleting = true }} {
		rec, err := d1.readRecord(id)
		if err != nil {
			t.Fatal(err)
		}
		mod(rec)
		if err := d1.writeRecord(id, rec); err != nil {
			t.Fatal(err)
		}
	}
	// "bad" has an unreadable record, "empty" none at all.
	os.MkdirAll(filepath.Join(d1.sandboxesDir(), "bad"), 0o700)
	os.WriteFile(d1.recordPath("bad"), []byte("{not json"), 0o600)
	os.MkdirAll(filepath.Join(d1.sandboxesDir(), "empty"), 0o700)
	// Containers without a sandbox: one named like a sandbox's, one not.
	spec := &specs.Spec{Version: specs.Version, Root: &specs.Root{Path: "rootfs"}}
	for _, id := range []string{ContainerID("orphan"), "unrelated"} {
		if err := rt.Create(ctx, id, runtime.CreateOpts{Spec: spec}); err != nil {
			t.Fatal(err)
		}
	}

	d2, warnings, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantWarnings := []string{
		"sandbox bad: removed an unfinished create or delete",
		"sandbox del: removed an unfinished create or delete",
		"sandbox empty: removed an unfinished create or delete",
		"sandbox half: removed an unfinished create or delete",
		"deleted container openshell-orphan: it has no sandbox",
	}
	if !reflect.DeepEqual(warnings, wantWarnings) {
		t.Errorf("warnings\n %q\nwant\n %q", warnings, wantWarnings)
	}
	l, err := d2.ListSandboxes(ctx, &pb.ListSandboxesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var order []string
	for _, sb := range l.GetSandboxes() {
		order = append(order, sb.GetId())
		got[sb.GetId()] = condition(sb)
		if sb.GetSpec().GetTemplate().GetImage() != testImage {
			t.Errorf("%s lost its spec: %v", sb.GetId(), sb.GetSpec())
		}
	}
	want := map[string]string{"gone": condMissing, "keep": condReady, "stopped": condStopped}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(order, []string{"gone", "keep", "stopped"}) {
		t.Errorf("sandboxes after restart %v (in the order %q), want %v", got, order, want)
	}
	states, _, _ := rt.List(ctx)
	var ids []string
	for _, st := range states {
		ids = append(ids, st.ID)
	}
	if want := []string{"openshell-keep", "unrelated"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("containers after restart %q, want %q", ids, want)
	}
	for _, id := range []string{"bad", "del", "empty", "half"} {
		wantNothingLeft(t, d2, rt, id)
	}
	// The restarted driver starts the sandbox whose container vanished
	// and the stopped one from their retained bundles.
	for _, id := range []string{"gone", "stopped"} {
		if _, err := d2.StartSandbox(ctx, &pb.StartSandboxRequest{SandboxId: id}); err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		if got := getCond(t, d2, id); got != condReady {
			t.Errorf("%s after start: %s", id, got)
		}
	}
	// A third driver finds nothing to clean up.
	newDriver(t, cfg)
}

// TestReconcileFailures: New reports a runtime that cannot list its
// containers, and a sandbox it could not clean up.
func TestReconcileFailures(t *testing.T) {
	rt := &hookedRuntime{Runtime: fake.New()}
	cfg := testConfig(t, rt)
	d := newDriver(t, cfg)
	create(t, d, "half")
	rec, _ := d.readRecord("half")
	rec.Ready = false
	d.writeRecord("half", rec)

	rt.set(func(r *hookedRuntime) { r.deleteErr = errBoom })
	_, warnings, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The directory is gone, the container is still there (the delete
	// failed), so it is also an orphan; so it stays on the next start.
	want := []string{
		"sandbox half: cleaning up an unfinished create or delete: boom",
		"container openshell-half without a sandbox: boom",
	}
	if !reflect.DeepEqual(warnings, want) {
		t.Errorf("warnings %q, want %q", warnings, want)
	}
	_, warnings, err = New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"container openshell-half without a sandbox: boom"}; !reflect.DeepEqual(warnings, want) {
		t.Errorf("warnings %q, want %q", warnings, want)
	}
	rt.set(func(r *hookedRuntime) { r.deleteErr = nil; r.listErr = errBoom })
	d, warnings, err = New(context.Background(), cfg)
	if err == nil || err.Error() != "list containers: boom" || d == nil || len(warnings) != 0 {
		t.Errorf("New with a failing List: %v, %q, %v", d, warnings, err)
	}
}
