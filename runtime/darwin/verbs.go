//go:build darwin || linux

package darwin

// The verbs after create: start, state and list, kill, delete, run, and
// those macOS cannot offer (exec, pause, events, update).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-spec/specs-go/features"

	"github.com/skillrun/skillrun/runtime"
)

// Start implements runtime.Runtime: it opens the exec fifo for reading,
// which releases the init to exec the sandboxed process.
func (e *engine) Start(ctx context.Context, id string) error {
	unlock, err := e.lock(id)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := e.load(id)
	if err != nil {
		return err
	}
	switch e.status(st) {
	case runtime.StatusStopped:
		return fmt.Errorf("start container %q: cannot start a container that has stopped: %w", id, runtime.ErrNotRunning)
	case runtime.StatusRunning:
		return fmt.Errorf("start container %q: cannot start an already running container", id)
	}
	fifo := filepath.Join(e.dir(id), fifoName)
	err = awaitExec(ctx, fifo, func() bool { return initAlive(st) })
	if rerr := os.Remove(fifo); rerr != nil && err == nil {
		err = fmt.Errorf("remove exec fifo: %w", rerr)
	}
	if err != nil {
		return fmt.Errorf("start container %q: %w", id, err)
	}
	return nil
}

// awaitExec opens the exec fifo for reading (releasing the init blocked in
// opening its other end) and reads until EOF: one byte, then, if exec
// failed, the init's error. It gives up when alive reports the init gone
// or ctx ends, unblocking its own open by opening the write end.
func awaitExec(ctx context.Context, fifo string, alive func() bool) error {
	type result struct {
		data []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_RDONLY, 0)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		data, err := io.ReadAll(f)
		ch <- result{data, err}
	}()
	unblock := func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case r := <-ch:
			switch {
			case r.err != nil:
				return fmt.Errorf("read exec fifo: %w", r.err)
			case len(r.data) == 0:
				return errors.New("container init exited before start")
			case len(r.data) > 1:
				return fmt.Errorf("container init: %s", r.data[1:])
			}
			return nil
		case <-tick.C:
			if !alive() {
				unblock()
				r := <-ch
				if len(r.data) == 1 {
					return nil // exec'd and already exited
				}
				if len(r.data) > 1 {
					return fmt.Errorf("container init: %s", r.data[1:])
				}
				return errors.New("container init exited before start")
			}
		case <-ctx.Done():
			unblock()
			<-ch
			return ctx.Err()
		}
	}
}

// State implements runtime.Runtime.
func (e *engine) State(ctx context.Context, id string) (*runtime.State, error) {
	st, err := e.load(id)
	if err != nil {
		return nil, err
	}
	s := e.public(st)
	return &s, nil
}

// public returns the runc view of a state: current status, PID 0 once
// stopped.
func (e *engine) public(st *containerState) runtime.State {
	s := st.State
	s.Status = e.status(st)
	if s.Status == runtime.StatusStopped {
		s.Pid = 0
	}
	return s
}

// List implements runtime.Runtime.
func (e *engine) List(ctx context.Context) ([]runtime.State, []error, error) {
	ents, err := os.ReadDir(e.root)
	if err != nil {
		return nil, nil, fmt.Errorf("list containers: %w", err)
	}
	var out []runtime.State
	var warns []error
	for _, ent := range ents {
		if !ent.IsDir() || runtime.ValidateID(ent.Name()) != nil {
			continue
		}
		st, err := e.load(ent.Name())
		if errors.Is(err, runtime.ErrNotExist) {
			continue // being created or deleted
		}
		if err != nil {
			warns = append(warns, err)
			continue
		}
		out = append(out, e.public(st))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, warns, nil
}

// Kill implements runtime.Runtime; with all, it signals the container's
// process group.
func (e *engine) Kill(ctx context.Context, id string, sig syscall.Signal, all bool) error {
	unlock, err := e.lock(id)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := e.load(id)
	if err != nil {
		return err
	}
	if all {
		// runc: --all on a container with nothing left to signal succeeds.
		if !groupIsOurs(st) {
			return nil
		}
		if pids, err := groupPids(st.Pid); err == nil && len(pids) == 0 {
			return nil
		}
		if err := syscall.Kill(-st.Pid, sig); err != nil {
			if errors.Is(err, syscall.ESRCH) {
				return nil
			}
			return fmt.Errorf("kill container %q: %w", id, err)
		}
		return nil
	}
	if e.status(st) == runtime.StatusStopped {
		return fmt.Errorf("kill container %q: %w", id, runtime.ErrNotRunning)
	}
	if err := syscall.Kill(st.Pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("kill container %q: %w", id, runtime.ErrNotRunning)
		}
		return fmt.Errorf("kill container %q: %w", id, err)
	}
	return nil
}

// Delete implements runtime.Runtime. A created container (its init still
// blocked) is deleted without force, as runc does; a running one needs
// force. What is left of the process group is killed in every case.
func (e *engine) Delete(ctx context.Context, id string, force bool) error {
	unlock, err := e.lock(id)
	if err != nil {
		if force && errors.Is(err, runtime.ErrNotExist) {
			// runc: a half-created directory is removed, and delete
			// --force of a missing container succeeds.
			_ = removeAll(e.dir(id))
			return nil
		}
		return err
	}
	defer unlock()
	st, err := e.load(id)
	if err != nil {
		return err
	}
	if status := e.status(st); status == runtime.StatusRunning && !force {
		return fmt.Errorf("cannot delete container %q that is not stopped: %w", id, runtime.ErrRunning)
	}
	if groupIsOurs(st) {
		if err := syscall.Kill(-st.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("delete container %q: kill: %w", id, err)
		}
		if err := waitGone(ctx, st); err != nil {
			return fmt.Errorf("delete container %q: %w", id, err)
		}
	}
	if err := removeAll(e.dir(id)); err != nil {
		return fmt.Errorf("delete container %q: %w", id, err)
	}
	return nil
}

// waitGone waits until the init is gone (reaped or a zombie), at most 10s.
func waitGone(ctx context.Context, st *containerState) error {
	deadline := time.Now().Add(10 * time.Second)
	for initAlive(st) {
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d did not exit after SIGKILL", st.Pid)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// Run implements runtime.Runtime.
func (e *engine) Run(ctx context.Context, id string, opts runtime.RunOpts) (int, error) {
	begin := time.Now()
	c, err := e.create(ctx, id, opts.CreateOpts)
	if err != nil {
		return 1, err
	}
	if err := e.Start(ctx, id); err != nil {
		e.Delete(context.WithoutCancel(ctx), id, true)
		return 1, err
	}
	if opts.Detach {
		return 0, nil
	}
	if opts.Started != nil {
		opts.Started(c.pid)
	}
	var ctxErr error
	for {
		select {
		case sig := <-opts.Signals:
			if s, ok := sig.(syscall.Signal); ok {
				syscall.Kill(c.pid, s)
			}
			continue
		case <-ctx.Done():
			// Kill the whole group, then report like Linux: the status of
			// the killed init (137) and the context's error.
			syscall.Kill(-c.pid, syscall.SIGKILL)
			<-c.done
			ctxErr = fmt.Errorf("run container %q: container killed: %w", id, ctx.Err())
		case <-c.done:
		}
		break
	}
	status := exitStatus(c.state)
	if ctxErr != nil {
		if opts.Exit != nil {
			fillExit(opts.Exit, c.state, time.Since(begin))
		}
		e.Delete(context.WithoutCancel(ctx), id, true)
		return status, ctxErr
	}
	if opts.Exit != nil {
		fillExit(opts.Exit, c.state, time.Since(begin))
	}
	if !opts.Keep {
		if err := e.Delete(context.WithoutCancel(ctx), id, true); err != nil {
			return status, err
		}
	}
	return status, nil
}

// exitStatus is the process' exit status, 128+N when killed by signal N.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func fillExit(x *runtime.ExitInfo, ps *os.ProcessState, wall time.Duration) {
	x.Status = exitStatus(ps)
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		x.Signal = ws.Signal()
	}
	x.Wall = wall
	x.UserCPU = ps.UserTime()
	x.SysCPU = ps.SystemTime()
	x.CPU = x.UserCPU + x.SysCPU
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		x.MaxRSS = int64(ru.Maxrss) * maxRSSUnit
	}
}

// Exec implements runtime.Runtime: not supported, since a second
// sandbox-exec would start a separate sandbox (signals between the two
// would be denied) outside the container's process group.
func (e *engine) Exec(ctx context.Context, id string, opts runtime.ExecOpts) (int, error) {
	return 1, runtime.NotSupportedError("exec", "darwin")
}

// Ps implements runtime.Runtime: the members of the container's process
// group (processes that left it with setsid or setpgid are not listed).
func (e *engine) Ps(ctx context.Context, id string) ([]int, error) {
	st, err := e.load(id)
	if err != nil {
		return nil, err
	}
	if !groupIsOurs(st) {
		return nil, fmt.Errorf("ps container %q: %w", id, runtime.ErrNotRunning)
	}
	pids, err := groupPids(st.Pid)
	if err != nil {
		return nil, fmt.Errorf("ps container %q: %w", id, err)
	}
	sort.Ints(pids)
	return pids, nil
}

// Pause implements runtime.Runtime: not supported (no freezer on macOS).
func (e *engine) Pause(ctx context.Context, id string) error {
	return runtime.NotSupportedError("pause", "darwin")
}

// Resume implements runtime.Runtime: not supported.
func (e *engine) Resume(ctx context.Context, id string) error {
	return runtime.NotSupportedError("resume", "darwin")
}

// Events implements runtime.Runtime: not supported (no cgroup statistics).
func (e *engine) Events(ctx context.Context, id string, opts runtime.EventsOpts, emit func(runtime.Event) error) error {
	return runtime.NotSupportedError("events", "darwin")
}

// Update implements runtime.Runtime: not supported (no cgroups).
func (e *engine) Update(ctx context.Context, id string, r *specs.LinuxResources) error {
	return runtime.NotSupportedError("update", "darwin")
}

// Features implements runtime.Runtime.
func (e *engine) Features() (*features.Features, error) {
	return &features.Features{
		OCIVersionMin: "1.0.0",
		OCIVersionMax: specs.Version,
		Hooks:         []string{},
		MountOptions:  []string{"bind", "rbind", "ro", "rw", "noexec"},
		Annotations: map[string]string{
			"io.github.skillrun.platform": "darwin",
			"io.github.skillrun.sandbox":  "seatbelt",
		},
	}, nil
}

// ownerName is the user name of uid, or "#uid" as runc prints it.
func ownerName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return "#" + strconv.Itoa(uid)
}
