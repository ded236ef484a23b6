//go:build darwin || linux

package darwin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-spec/specs-go/features"

	"github.com/skillrun/skillrun/internal/safefs"
	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/seatbelt"
)

// Config holds the darwin back end's own options, beyond runc's global
// flags.
type Config struct {
	// AcceptDegradation lets create run a configuration with fields macOS
	// cannot honour (seatbelt.Rejected): they are ignored and reported
	// through runtime.Options.Warn.
	AcceptDegradation bool
}

// launcher says how the init is started and what it execs. The darwin
// launcher re-executes skillrun as `skillrun init` and has the init exec
// sandbox-exec; tests on Linux use the test binary and exec the command
// directly.
type launcher struct {
	// initPath and initArgs start the init process.
	initPath string
	initArgs []string
	// initEnv is added to the init's environment.
	initEnv []string
	// command returns the argv the init execs for a translated profile
	// stored at profileFile.
	command func(p *seatbelt.Profile, profileFile string) []string
}

// engine implements runtime.Runtime. It holds only configuration; all
// state lives under root, guarded by per-container flocks.
type engine struct {
	root   string
	opts   runtime.Options
	cfg    Config
	launch launcher
}

var _ runtime.Runtime = (*engine)(nil)

func newEngine(opts runtime.Options, cfg Config, l launcher) (*engine, error) {
	if opts.Root == "" || !filepath.IsAbs(opts.Root) {
		return nil, fmt.Errorf("state root %q: must be an absolute path", opts.Root)
	}
	if err := os.MkdirAll(opts.Root, 0o700); err != nil {
		return nil, fmt.Errorf("create state root: %w", err)
	}
	fi, err := os.Stat(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("state root: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
		return nil, fmt.Errorf("state root %s is owned by uid %d, not by uid %d", opts.Root, st.Uid, os.Geteuid())
	}
	return &engine{root: opts.Root, opts: opts, cfg: cfg, launch: l}, nil
}

func (e *engine) warn(msg string) {
	if e.opts.Warn != nil {
		e.opts.Warn(msg)
	}
}

// child is a started init, reaped by a goroutine of the creating process.
type child struct {
	pid  int
	done chan struct{}
	// state is valid once done is closed.
	state *os.ProcessState
}

// Create implements runtime.Runtime.
func (e *engine) Create(ctx context.Context, id string, opts runtime.CreateOpts) error {
	_, err := e.create(ctx, id, opts)
	return err
}

func (e *engine) loadSpec(opts runtime.CreateOpts) (*specs.Spec, string, error) {
	bundle := opts.Bundle
	if bundle == "" {
		bundle = "."
	}
	bundle, err := filepath.Abs(bundle)
	if err != nil {
		return nil, "", fmt.Errorf("bundle: %w", err)
	}
	if opts.Spec != nil {
		return opts.Spec, bundle, nil
	}
	s, err := runtime.LoadBundle(bundle)
	if err != nil {
		return nil, "", err
	}
	return s, bundle, nil
}

func (e *engine) create(ctx context.Context, id string, opts runtime.CreateOpts) (*child, error) {
	if err := runtime.ValidateID(id); err != nil {
		return nil, err
	}
	if e.opts.SystemdCgroup {
		return nil, fmt.Errorf("create container %q: the systemd cgroup driver is %w on darwin", id, runtime.ErrNotSupported)
	}
	if opts.ConsoleSocket != "" {
		return nil, fmt.Errorf("create container %q: %w", id, runtime.NotSupportedError("console socket", "darwin"))
	}
	spec, bundle, err := e.loadSpec(opts)
	if err != nil {
		return nil, fmt.Errorf("create container %q: %w", id, err)
	}
	dir := e.dir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create container %q: %w", id, runtime.ErrExist)
		}
		return nil, fmt.Errorf("create container %q: %w", id, err)
	}
	lf, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		err = flock(lf)
	}
	if err != nil {
		removeAll(dir)
		return nil, fmt.Errorf("create container %q: lock: %w", id, err)
	}
	defer lf.Close()
	c, err := e.createLocked(ctx, id, bundle, spec, opts)
	if err != nil {
		removeAll(dir)
		return nil, fmt.Errorf("create container %q: %w", id, err)
	}
	return c, nil
}

func (e *engine) createLocked(ctx context.Context, id, bundle string, spec *specs.Spec, opts runtime.CreateOpts) (*child, error) {
	dir := e.dir(id)
	prof, warns, err := seatbelt.FromSpec(spec, seatbelt.Options{
		Bundle:            bundle,
		ScratchDir:        filepath.Join(dir, scratchName),
		Caller:            &seatbelt.Caller{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())},
		AcceptDegradation: e.cfg.AcceptDegradation,
	})
	if err != nil {
		return nil, err
	}
	for _, w := range warns {
		e.warn(w.String())
	}
	profileFile := filepath.Join(dir, profileName)
	if err := safefs.WriteFileDurable(profileFile, []byte(prof.Text), 0o600); err != nil {
		return nil, fmt.Errorf("write profile: %w", err)
	}
	for _, d := range prof.ScratchDirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create scratch directory: %w", err)
		}
	}
	fifo := filepath.Join(dir, fifoName)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		return nil, fmt.Errorf("create exec fifo: %w", &os.PathError{Op: "mkfifo", Path: fifo, Err: err})
	}
	command := e.launch.command(prof, profileFile)
	c, err := e.startInit(opts, initConfig{
		Args:    command,
		Env:     prof.Env,
		Cwd:     prof.Cwd,
		Rlimits: prof.Rlimits,
		Umask:   prof.Umask,
		Fifo:    fifo,
	})
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*child, error) {
		syscall.Kill(-c.pid, syscall.SIGKILL)
		<-c.done
		return nil, err
	}
	start, _, err := procInfo(c.pid)
	if err != nil {
		return fail(fmt.Errorf("read init process: %w", err))
	}
	rootfs := ""
	if spec.Root != nil {
		rootfs = spec.Root.Path
		if !filepath.IsAbs(rootfs) {
			rootfs = filepath.Join(bundle, rootfs)
		}
	}
	st := &containerState{
		State: runtime.State{
			OCIVersion:  spec.Version,
			ID:          id,
			Pid:         c.pid,
			Status:      runtime.StatusCreated,
			Bundle:      bundle,
			Rootfs:      rootfs,
			Created:     time.Now().UTC(),
			Annotations: spec.Annotations,
			Owner:       ownerName(os.Geteuid()),
		},
		StartTime: start,
		Command:   command,
		Network:   prof.Network,
	}
	if err := e.save(st); err != nil {
		return fail(err)
	}
	if opts.PidFile != "" {
		pf, err := filepath.Abs(opts.PidFile)
		if err == nil {
			err = safefs.WriteFileDurable(pf, []byte(strconv.Itoa(c.pid)), 0o644)
		}
		if err != nil {
			return fail(fmt.Errorf("write pid file: %w", err))
		}
	}
	return c, nil
}

// startInit starts the init in a new session (its own process group, for
// kill --all), sends it its configuration and waits for its status.
func (e *engine) startInit(opts runtime.CreateOpts, cfg initConfig) (*child, error) {
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start init: %w", err)
	}
	defer cfgR.Close()
	defer cfgW.Close()
	syncR, syncW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start init: %w", err)
	}
	defer syncR.Close()
	defer syncW.Close()

	cmd := &exec.Cmd{
		Path:        e.launch.initPath,
		Args:        e.launch.initArgs,
		Stdin:       opts.Stdio.Stdin,
		Stdout:      opts.Stdio.Stdout,
		Stderr:      opts.Stdio.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	// Descriptors 3..3+PreserveFDs-1 pass through, as with runc; the
	// init's own pipes come after them.
	for i := 0; i < opts.PreserveFDs; i++ {
		cmd.ExtraFiles = append(cmd.ExtraFiles, os.NewFile(uintptr(3+i), "preserved-fd-"+strconv.Itoa(3+i)))
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, opts.ExtraFiles...)
	cmd.ExtraFiles = append(cmd.ExtraFiles, cfgR, syncW)
	n := opts.PreserveFDs + len(opts.ExtraFiles)
	cfgFD, syncFD := 3+n, 4+n
	cmd.Env = append([]string{initFDsEnv + "=" + strconv.Itoa(cfgFD) + "," + strconv.Itoa(syncFD)}, e.launch.initEnv...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start init: %w", err)
	}
	c := &child{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		c.state = cmd.ProcessState
		close(c.done)
	}()
	cfgR.Close()
	syncW.Close()
	fail := func(err error) (*child, error) {
		syscall.Kill(-c.pid, syscall.SIGKILL)
		<-c.done
		return nil, err
	}
	if err := json.NewEncoder(cfgW).Encode(cfg); err != nil {
		return fail(fmt.Errorf("send init configuration: %w", err))
	}
	cfgW.Close()
	var st initStatus
	if err := json.NewDecoder(syncR).Decode(&st); err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("init exited without reporting")
		}
		return fail(fmt.Errorf("container init: %w", err))
	}
	if st.Error != "" {
		return fail(fmt.Errorf("container init: %s", st.Error))
	}
	return c, nil
}

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
