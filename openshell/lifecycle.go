package openshell

// Container lifecycle: creating a sandbox (record, bundle, container),
// starting, stopping and deleting it, and reconciling the state directory
// with the runtime when a driver starts.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/skillrun/skillrun/internal/safefs"
	pb "github.com/skillrun/skillrun/openshell/computev1"
	"github.com/skillrun/skillrun/runtime"
)

// reconcile removes what a previous driver left half done.
func (d *Driver) reconcile(ctx context.Context) ([]string, error) {
	var warnings []string
	ents, err := os.ReadDir(d.sandboxesDir())
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, e := range ents {
		id := e.Name()
		rec, err := d.readRecord(id)
		switch {
		case err != nil || !rec.Ready || rec.Deleting:
			if err := d.destroy(ctx, id); err != nil {
				warnings = append(warnings, fmt.Sprintf("sandbox %s: cleaning up an unfinished create or delete: %v", id, err))
			} else {
				warnings = append(warnings, fmt.Sprintf("sandbox %s: removed an unfinished create or delete", id))
			}
		default:
			known[id] = true
		}
	}
	states, _, err := d.cfg.Runtime.List(ctx)
	if err != nil {
		return warnings, fmt.Errorf("list containers: %w", err)
	}
	for _, st := range states {
		id, ok := strings.CutPrefix(st.ID, ContainerPrefix)
		if !ok || known[id] {
			continue
		}
		if err := d.cfg.Runtime.Delete(ctx, st.ID, true); err != nil && !errors.Is(err, runtime.ErrNotExist) {
			warnings = append(warnings, fmt.Sprintf("container %s without a sandbox: %v", st.ID, err))
		} else {
			warnings = append(warnings, fmt.Sprintf("deleted container %s: it has no sandbox", st.ID))
		}
	}
	return warnings, nil
}

// createSandbox is CreateSandbox: it unpacks the image into a new bundle
// and starts the sandbox's container. AlreadyExists when the ID is taken;
// on failure nothing is left behind.
func (d *Driver) createSandbox(ctx context.Context, sb *pb.DriverSandbox) error {
	if err := d.validate(ctx, sb); err != nil {
		return err
	}
	id := sb.GetId()
	unlock := d.lock(id)
	defer unlock()
	if _, err := os.Lstat(d.sandboxDir(id)); err == nil {
		return status.Errorf(codes.AlreadyExists, "sandbox %s already exists", id)
	}
	if err := d.create(ctx, sb); err != nil {
		// Nothing left behind: no container, no directory.
		_ = d.destroy(context.WithoutCancel(ctx), id)
		d.publish(id)
		if status.Code(err) != codes.Unknown {
			return err
		}
		return status.Errorf(codes.Internal, "create sandbox %s: %v", id, err)
	}
	d.publish(id)
	return nil
}

func (d *Driver) create(ctx context.Context, sb *pb.DriverSandbox) error {
	id := sb.GetId()
	dir := d.sandboxDir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	kept := proto.Clone(sb).(*pb.DriverSandbox)
	kept.Status = nil
	if kept.Spec != nil {
		kept.Spec.SandboxToken = ""
	}
	raw, err := protojson.Marshal(kept)
	if err != nil {
		return err
	}
	rec := &record{Sandbox: raw}
	if err := d.writeRecord(id, rec); err != nil {
		return err
	}
	d.publish(id) // Starting
	bundle := d.bundleDir(id)
	if err := os.Mkdir(bundle, 0o700); err != nil {
		return err
	}
	imgCfg, err := d.unpack(ctx, d.cfg.ImagesDir, d.imageOf(sb), filepath.Join(bundle, "rootfs"))
	if err != nil {
		return err
	}
	spec, err := d.buildSpec(sb, imgCfg)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(spec, "", "\t")
	if err != nil {
		return err
	}
	if err := safefs.WriteFileDurable(filepath.Join(bundle, "config.json"), data, 0o600); err != nil {
		return err
	}
	if err := d.start(ctx, id); err != nil {
		return err
	}
	rec.Ready = true
	return d.writeRecord(id, rec)
}

// start runs the sandbox's container from its bundle, detached, removing
// a stopped container of the same ID first.
func (d *Driver) start(ctx context.Context, id string) error {
	cid := ContainerID(id)
	st, err := d.cfg.Runtime.State(ctx, cid)
	switch {
	case err == nil && (st.Status == runtime.StatusRunning || st.Status == runtime.StatusPaused):
		return nil
	case err == nil:
		if err := d.cfg.Runtime.Delete(ctx, cid, true); err != nil && !errors.Is(err, runtime.ErrNotExist) {
			return fmt.Errorf("remove old container: %w", err)
		}
	case !errors.Is(err, runtime.ErrNotExist):
		return err
	}
	// The container's output (the supervisor's log) is appended to
	// console.log next to the bundle.
	logf, err := os.OpenFile(filepath.Join(d.sandboxDir(id), "console.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	if _, err := d.cfg.Runtime.Run(ctx, cid, runtime.RunOpts{
		CreateOpts: runtime.CreateOpts{Bundle: d.bundleDir(id), Stdio: runtime.Stdio{Stdout: logf, Stderr: logf}},
		Detach:     true,
	}); err != nil {
		return fmt.Errorf("start container %s: %w", cid, err)
	}
	// The driver is the container init's parent: reap it when it exits
	// so that it does not linger as a zombie.
	if st, err := d.cfg.Runtime.State(ctx, cid); err == nil && st.Pid > 0 {
		go func(pid int) {
			var ws syscall.WaitStatus
			for {
				_, err := syscall.Wait4(pid, &ws, 0, nil)
				if err != syscall.EINTR {
					break
				}
			}
			d.notify()
		}(st.Pid)
	}
	return nil
}

// destroy removes the container and the directory of sandbox id.
func (d *Driver) destroy(ctx context.Context, id string) error {
	var errs []error
	if err := d.cfg.Runtime.Delete(ctx, ContainerID(id), true); err != nil && !errors.Is(err, runtime.ErrNotExist) {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(d.sandboxDir(id)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// stopSandbox is StopSandbox: it stops the container (SIGTERM, SIGKILL
// after the timeout) and removes it, keeping the bundle and workspace.
// Idempotent.
func (d *Driver) stopSandbox(ctx context.Context, sid, name string) error {
	id, rec, unlock, err := d.lockRecord(sid, name)
	if err != nil {
		return err
	}
	defer unlock()
	if rec.Deleting {
		return status.Errorf(codes.FailedPrecondition, "sandbox %s is being deleted", id)
	}
	// The intent is written first (a driver killed mid-stop leaves a
	// sandbox that is stopped, or says so), and undone when the container
	// outlives a failed stop: the record never says Stopped while its
	// container runs.
	wasStopped := rec.Stopped
	rec.Stopped = true
	if err := d.writeRecord(id, rec); err != nil {
		return status.Errorf(codes.Internal, "stop sandbox %s: %v", id, err)
	}
	if err := d.stopContainer(ctx, ContainerID(id)); err != nil {
		st, serr := d.cfg.Runtime.State(context.WithoutCancel(ctx), ContainerID(id))
		if serr == nil && (st.Status == runtime.StatusRunning || st.Status == runtime.StatusPaused) {
			rec.Stopped = wasStopped
			if werr := d.writeRecord(id, rec); werr != nil {
				err = errors.Join(err, werr)
			}
		}
		d.publish(id)
		return status.Errorf(codes.Internal, "stop sandbox %s: %v", id, err)
	}
	d.publish(id)
	return nil
}

// stopContainer stops and deletes a container; a missing one is fine.
func (d *Driver) stopContainer(ctx context.Context, cid string) error {
	rt := d.cfg.Runtime
	st, err := rt.State(ctx, cid)
	if errors.Is(err, runtime.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Status == runtime.StatusRunning || st.Status == runtime.StatusPaused {
		if st.Status == runtime.StatusPaused {
			_ = rt.Resume(ctx, cid)
		}
		_ = rt.Kill(ctx, cid, syscall.SIGTERM, false)
		deadline := time.Now().Add(d.cfg.StopTimeout)
		for time.Now().Before(deadline) {
			st, err := rt.State(ctx, cid)
			if err != nil || st.Status == runtime.StatusStopped {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	if err := rt.Delete(ctx, cid, true); err != nil && !errors.Is(err, runtime.ErrNotExist) {
		return err
	}
	return nil
}

// startSandbox is StartSandbox: it re-creates a stopped sandbox's
// container from its retained bundle. Idempotent: a running sandbox is
// left alone.
func (d *Driver) startSandbox(ctx context.Context, sid, name string) error {
	id, rec, unlock, err := d.lockRecord(sid, name)
	if err != nil {
		return err
	}
	defer unlock()
	if rec.Deleting || !rec.Ready {
		return status.Errorf(codes.FailedPrecondition, "sandbox %s is being created or deleted", id)
	}
	if err := d.start(ctx, id); err != nil {
		return status.Errorf(codes.Internal, "start sandbox %s: %v", id, err)
	}
	if rec.Stopped {
		rec.Stopped = false
		if err := d.writeRecord(id, rec); err != nil {
			return status.Errorf(codes.Internal, "start sandbox %s: %v", id, err)
		}
	}
	d.publish(id)
	return nil
}

// deleteSandbox is DeleteSandbox: it removes the container, bundle, token
// and workspace. Idempotent: deleting a sandbox that does not exist
// answers deleted=false.
func (d *Driver) deleteSandbox(ctx context.Context, sid, name string) (deleted bool, err error) {
	id, err := d.find(sid, name)
	if status.Code(err) == codes.NotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	unlock := d.lock(id)
	defer unlock()
	rec, err := d.readRecord(id)
	if err != nil {
		return false, nil
	}
	rec.Deleting = true
	if err := d.writeRecord(id, rec); err != nil {
		return false, status.Errorf(codes.Internal, "delete sandbox %s: %v", id, err)
	}
	d.publish(id) // Deleting
	if err := d.stopContainer(ctx, ContainerID(id)); err != nil {
		return false, status.Errorf(codes.Internal, "delete sandbox %s: %v", id, err)
	}
	if err := d.destroy(ctx, id); err != nil {
		return false, status.Errorf(codes.Internal, "delete sandbox %s: %v", id, err)
	}
	d.publish(id) // deleted
	return true, nil
}
