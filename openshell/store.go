package openshell

// The record store: the state directory's layout, the durable record of
// every sandbox, the per-sandbox locks that serialise its mutations, and
// the observed state of a sandbox (its record and its container's state).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/skillrun/skillrun/internal/safefs"
	pb "github.com/skillrun/skillrun/openshell/computev1"
	"github.com/skillrun/skillrun/runtime"
)

// Condition reasons, as OpenShell's Docker driver reports them.
const (
	reasonReady    = "BackendReady"
	reasonStarting = "Starting"
	reasonExited   = "ContainerExited"
	reasonPaused   = "ContainerPaused"
	reasonDeleting = "Deleting"
)

// record is what the driver keeps on disk about a sandbox.
type record struct {
	// Sandbox is the create request's DriverSandbox (protojson), with the
	// token and status removed.
	Sandbox json.RawMessage `json:"sandbox"`
	// Stopped is true after StopSandbox, until StartSandbox.
	Stopped bool `json:"stopped,omitempty"`
	// Deleting is true once DeleteSandbox began.
	Deleting bool `json:"deleting,omitempty"`
	// Ready is false until the bundle is complete and the container was
	// first started.
	Ready bool `json:"ready,omitempty"`
}

func (d *Driver) sandboxesDir() string        { return filepath.Join(d.cfg.StateDir, "sandboxes") }
func (d *Driver) sandboxDir(id string) string { return filepath.Join(d.sandboxesDir(), id) }
func (d *Driver) recordPath(id string) string { return filepath.Join(d.sandboxDir(id), "sandbox.json") }
func (d *Driver) bundleDir(id string) string  { return filepath.Join(d.sandboxDir(id), "bundle") }

// mutex returns the lock of sandbox id, made on first use. Mutations
// hold it exclusively; watch streams look at the sandbox under a read
// lock, so that streams never hide a sandbox from each other.
func (d *Driver) mutex(id string) *sync.RWMutex {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.locks[id]
	if !ok {
		l = &sync.RWMutex{}
		d.locks[id] = l
	}
	return l
}

// lock serialises the mutations of one sandbox.
func (d *Driver) lock(id string) func() {
	l := d.mutex(id)
	l.Lock()
	return l.Unlock
}

// tryRLock takes id's read lock without waiting: ok is false while a
// mutation holds the sandbox (or waits for it), which then publishes its
// states itself. Any number of readers (watch streams) hold it together.
func (d *Driver) tryRLock(id string) (unlock func(), ok bool) {
	l := d.mutex(id)
	if !l.TryRLock() {
		return nil, false
	}
	return l.RUnlock, true
}

func (d *Driver) readRecord(id string) (*record, error) {
	data, err := os.ReadFile(d.recordPath(id))
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", d.recordPath(id), err)
	}
	return &r, nil
}

func (d *Driver) writeRecord(id string, r *record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return safefs.WriteFileDurable(d.recordPath(id), data, 0o600)
}

// sandboxOf decodes a record's sandbox.
func (r *record) sandboxOf() (*pb.DriverSandbox, error) {
	var sb pb.DriverSandbox
	if err := protojson.Unmarshal(r.Sandbox, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// lockRecord finds a sandbox by id or name, takes its lock and reads its
// record; NotFound when either is missing. The caller calls unlock.
func (d *Driver) lockRecord(sid, name string) (string, *record, func(), error) {
	id, err := d.find(sid, name)
	if err != nil {
		return "", nil, nil, err
	}
	unlock := d.lock(id)
	rec, err := d.readRecord(id)
	if err != nil {
		unlock()
		return "", nil, nil, status.Errorf(codes.NotFound, "sandbox %s not found", id)
	}
	return id, rec, unlock, nil
}

// find returns the ID of the sandbox a request names (by ID, or by name).
func (d *Driver) find(id, name string) (string, error) {
	if id == "" && name == "" {
		return "", status.Error(codes.InvalidArgument, "sandbox_id or sandbox_name is required")
	}
	if id != "" {
		if !validID(id) {
			return "", invalid("sandbox_id", "%q is not a valid sandbox ID", id)
		}
		if _, err := os.Lstat(d.recordPath(id)); err != nil {
			return "", status.Errorf(codes.NotFound, "sandbox %s not found", id)
		}
		return id, nil
	}
	sbs, err := d.list(context.Background(), false)
	if err != nil {
		return "", err
	}
	for _, sb := range sbs {
		if sb.GetName() == name {
			return sb.GetId(), nil
		}
	}
	return "", status.Errorf(codes.NotFound, "sandbox named %q not found", name)
}

// get returns the observed state of the sandbox a request names, with its
// spec; NotFound if none.
func (d *Driver) get(ctx context.Context, sid, name string) (*pb.DriverSandbox, error) {
	id, err := d.find(sid, name)
	if err != nil {
		return nil, err
	}
	sb, err := d.snapshot(ctx, id, true)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "sandbox %s not found", id)
	}
	return sb, nil
}

// snapshot is the observed state of sandbox id.
func (d *Driver) snapshot(ctx context.Context, id string, withSpec bool) (*pb.DriverSandbox, error) {
	rec, err := d.readRecord(id)
	if err != nil {
		return nil, err
	}
	sb, err := rec.sandboxOf()
	if err != nil {
		return nil, err
	}
	if !withSpec {
		sb.Spec = nil
	}
	cond := &pb.DriverCondition{Type: "Ready", Status: "False"}
	st := &pb.DriverSandboxStatus{SandboxName: sb.GetName(), Conditions: []*pb.DriverCondition{cond}}
	sb.Status = st
	cs, err := d.cfg.Runtime.State(ctx, ContainerID(id))
	if err == nil {
		st.InstanceId = cs.ID
	}
	switch {
	case rec.Deleting:
		cond.Reason, cond.Message, st.Deleting = reasonDeleting, "Sandbox is being deleted", true
	case err != nil && !rec.Ready:
		cond.Reason, cond.Message = reasonStarting, "Sandbox is being provisioned"
	case err != nil && rec.Stopped:
		cond.Reason, cond.Message = reasonExited, "Sandbox is stopped"
	case err != nil:
		cond.Reason, cond.Message = reasonExited, "Container does not exist"
	case cs.Status == runtime.StatusRunning:
		cond.Status, cond.Reason, cond.Message = "True", reasonReady, "Container is running"
	case cs.Status == runtime.StatusPaused:
		cond.Reason, cond.Message = reasonPaused, "Container is paused"
	case cs.Status == runtime.StatusStopped:
		cond.Reason, cond.Message = reasonExited, "Container exited"
	default: // creating, created
		cond.Reason, cond.Message = reasonStarting, "Container "+cs.Status
	}
	return sb, nil
}

// list returns a snapshot of every sandbox, sorted by ID.
func (d *Driver) list(ctx context.Context, withSpec bool) ([]*pb.DriverSandbox, error) {
	ents, err := os.ReadDir(d.sandboxesDir())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "list sandboxes: %v", err)
	}
	var out []*pb.DriverSandbox
	for _, e := range ents {
		sb, err := d.snapshot(ctx, e.Name(), withSpec)
		if err != nil {
			continue // being created or removed
		}
		out = append(out, sb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetId() < out[j].GetId() })
	return out, nil
}

// ensureWorkspace creates the directory of workspace ws (a valid name).
// Idempotent.
func (d *Driver) ensureWorkspace(ws string) error {
	if err := os.Mkdir(filepath.Join(d.cfg.StateDir, "workspaces", ws), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return status.Errorf(codes.Internal, "workspace %s: %v", ws, err)
	}
	return nil
}

// deleteWorkspace removes the directory of workspace ws (a valid name);
// FailedPrecondition while sandboxes of the workspace exist. Idempotent.
func (d *Driver) deleteWorkspace(ctx context.Context, ws string) error {
	sbs, err := d.list(ctx, false)
	if err != nil {
		return err
	}
	for _, sb := range sbs {
		if sb.GetWorkspace() == ws {
			return status.Errorf(codes.FailedPrecondition, "workspace %s still has sandbox %s", ws, sb.GetId())
		}
	}
	if err := os.RemoveAll(filepath.Join(d.cfg.StateDir, "workspaces", ws)); err != nil {
		return status.Errorf(codes.Internal, "workspace %s: %v", ws, err)
	}
	return nil
}
