// Package fake is an in-memory runtime.Runtime for CLI tests: it follows the
// OCI state machine (created, running, paused, stopped) and runc's error
// wording without starting processes.
package fake

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-spec/specs-go/features"

	"github.com/skillrun/skillrun/runtime"
)

// Runtime is the fake engine. The zero value is not usable; call New.
// It is safe for concurrent use.
type Runtime struct {
	mu      sync.Mutex
	ctrs    map[string]*ctr
	nextPid int
	// ExitStatus is what Run and Exec report for foreground processes.
	ExitStatus int
	// Calls records every call as "verb id".
	Calls []string
}

type ctr struct {
	state     runtime.State
	resources *specs.LinuxResources
	signals   []syscall.Signal
}

// New returns an empty fake runtime.
func New() *Runtime { return &Runtime{ctrs: map[string]*ctr{}, nextPid: 1000} }

var _ runtime.Runtime = (*Runtime)(nil)

func (r *Runtime) record(verb, id string) { r.Calls = append(r.Calls, verb+" "+id) }

func (r *Runtime) get(id string) (*ctr, error) {
	if err := runtime.ValidateID(id); err != nil {
		return nil, err
	}
	c, ok := r.ctrs[id]
	if !ok {
		return nil, runtime.ErrNotExist
	}
	return c, nil
}

// Create implements runtime.Runtime.
func (r *Runtime) Create(_ context.Context, id string, o runtime.CreateOpts) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("create", id)
	if err := runtime.ValidateID(id); err != nil {
		return err
	}
	if _, ok := r.ctrs[id]; ok {
		return runtime.ErrExist
	}
	spec := o.Spec
	if spec == nil {
		var err error
		if spec, err = runtime.LoadBundle(o.Bundle); err != nil {
			return err
		}
	}
	r.nextPid++
	c := &ctr{state: runtime.State{
		OCIVersion:  spec.Version,
		ID:          id,
		Pid:         r.nextPid,
		Status:      runtime.StatusCreated,
		Bundle:      o.Bundle,
		Rootfs:      spec.Root.Path,
		Created:     time.Now().UTC(),
		Annotations: spec.Annotations,
	}}
	if spec.Linux != nil {
		c.resources = spec.Linux.Resources
	}
	r.ctrs[id] = c
	return nil
}

// Start implements runtime.Runtime.
func (r *Runtime) Start(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("start", id)
	c, err := r.get(id)
	if err != nil {
		return err
	}
	switch c.state.Status {
	case runtime.StatusCreated:
		c.state.Status = runtime.StatusRunning
		return nil
	case runtime.StatusStopped:
		return fmt.Errorf("cannot start a container that has stopped")
	case runtime.StatusRunning:
		return fmt.Errorf("cannot start an already running container")
	default:
		return fmt.Errorf("cannot start a container in the %s state", c.state.Status)
	}
}

// Run implements runtime.Runtime: a foreground run "exits" at once with
// ExitStatus.
func (r *Runtime) Run(ctx context.Context, id string, o runtime.RunOpts) (int, error) {
	if err := r.Create(ctx, id, o.CreateOpts); err != nil {
		return -1, err
	}
	if err := r.Start(ctx, id); err != nil {
		return -1, err
	}
	if o.Detach {
		return 0, nil
	}
	if o.Started != nil {
		r.mu.Lock()
		pid := r.ctrs[id].state.Pid
		r.mu.Unlock()
		o.Started(pid)
	}
	r.mu.Lock()
	status := r.ExitStatus
	r.ctrs[id].state.Status = runtime.StatusStopped
	if o.Exit != nil {
		o.Exit.Status = status
	}
	if !o.Keep {
		delete(r.ctrs, id)
	}
	r.mu.Unlock()
	return status, nil
}

// State implements runtime.Runtime.
func (r *Runtime) State(_ context.Context, id string) (*runtime.State, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.get(id)
	if err != nil {
		return nil, err
	}
	st := c.state
	if st.Status == runtime.StatusStopped {
		st.Pid = 0
	}
	return &st, nil
}

// List implements runtime.Runtime.
func (r *Runtime) List(context.Context) ([]runtime.State, []error, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []runtime.State
	for _, c := range r.ctrs {
		out = append(out, c.state)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil, nil
}

// Kill implements runtime.Runtime: SIGKILL and SIGTERM stop the container.
func (r *Runtime) Kill(_ context.Context, id string, sig syscall.Signal, all bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("kill", id)
	c, err := r.get(id)
	if err != nil {
		return err
	}
	if c.state.Status == runtime.StatusStopped {
		if all {
			return nil
		}
		return runtime.ErrNotRunning
	}
	c.signals = append(c.signals, sig)
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		c.state.Status = runtime.StatusStopped
	}
	return nil
}

// Signals returns the signals a container received.
func (r *Runtime) Signals(id string) []syscall.Signal {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.ctrs[id]; ok {
		return append([]syscall.Signal(nil), c.signals...)
	}
	return nil
}

// Delete implements runtime.Runtime.
func (r *Runtime) Delete(_ context.Context, id string, force bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("delete", id)
	c, err := r.get(id)
	if err != nil {
		if err == runtime.ErrNotExist && force {
			return nil
		}
		return err
	}
	switch {
	case force, c.state.Status == runtime.StatusStopped, c.state.Status == runtime.StatusCreated:
		delete(r.ctrs, id)
		return nil
	default:
		return fmt.Errorf("cannot delete container %s that is not stopped: %s", id, c.state.Status)
	}
}

// Exec implements runtime.Runtime.
func (r *Runtime) Exec(_ context.Context, id string, o runtime.ExecOpts) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("exec", id)
	c, err := r.get(id)
	if err != nil {
		return -1, err
	}
	if err := runtime.ValidateProcess(o.Process); err != nil {
		return -1, err
	}
	switch c.state.Status {
	case runtime.StatusStopped:
		return -1, fmt.Errorf("cannot exec in a stopped container")
	case runtime.StatusPaused:
		return -1, fmt.Errorf("cannot exec in a paused container")
	}
	if o.Detach {
		return 0, nil
	}
	return r.ExitStatus, nil
}

// Ps implements runtime.Runtime.
func (r *Runtime) Ps(_ context.Context, id string) ([]int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.get(id)
	if err != nil {
		return nil, err
	}
	if c.state.Status == runtime.StatusStopped {
		return []int{}, nil
	}
	return []int{c.state.Pid}, nil
}

// Pause implements runtime.Runtime.
func (r *Runtime) Pause(_ context.Context, id string) error {
	return r.transition(id, runtime.StatusRunning, runtime.StatusPaused, runtime.ErrNotRunning)
}

// Resume implements runtime.Runtime.
func (r *Runtime) Resume(_ context.Context, id string) error {
	return r.transition(id, runtime.StatusPaused, runtime.StatusRunning, runtime.ErrNotPaused)
}

func (r *Runtime) transition(id, from, to string, bad error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.get(id)
	if err != nil {
		return err
	}
	if c.state.Status != from {
		return bad
	}
	c.state.Status = to
	return nil
}

// Events implements runtime.Runtime with one empty stats event.
func (r *Runtime) Events(ctx context.Context, id string, o runtime.EventsOpts, emit func(runtime.Event) error) error {
	st, err := r.State(ctx, id)
	if err != nil {
		return err
	}
	if st.Status == runtime.StatusStopped {
		return fmt.Errorf("container with id %s is not running", id)
	}
	return emit(runtime.Event{Type: "stats", ID: id, Data: map[string]any{}})
}

// Update implements runtime.Runtime.
func (r *Runtime) Update(_ context.Context, id string, res *specs.LinuxResources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.get(id)
	if err != nil {
		return err
	}
	c.resources = res
	return nil
}

// Resources returns the last resources set by Create or Update.
func (r *Runtime) Resources(id string) *specs.LinuxResources {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.ctrs[id]; ok {
		return c.resources
	}
	return nil
}

// Features implements runtime.Runtime.
func (r *Runtime) Features() (*features.Features, error) {
	return &features.Features{OCIVersionMin: "1.0.0", OCIVersionMax: specs.Version}, nil
}
