//go:build linux

package linux

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/specconv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/runtime"
)

// started is a container whose init has been spawned by this process.
type started struct {
	c  *libcontainer.Container
	p  *libcontainer.Process
	io *procIO
	// limits says the container's cgroups are this process' to set
	// (CgroupLimits).
	limits bool
	// The fields below are what an exit report reads of the container's
	// cgroups (readCgroups, for a Run whose caller asks for one): cgroups
	// says it has some.
	cgroups bool
	// memDir is the container's memory cgroup folder ("" when none).
	memDir string
	// pidsDir is its pids cgroup folder ("" when none).
	pidsDir string
	// usage, opened when the process runs its program, is what its exit
	// report reads of the cgroups (Run; nil otherwise).
	usage *usageFiles
	// cpuDir is its CPU accounting cgroup folder ("" when none), and
	// cpuV2 says it is a cgroup v2 folder (cpu.stat).
	cpuDir string
	cpuV2  bool
}

// Create implements runtime.Runtime: the init is left blocked on the exec
// fifo until Start.
func (r *Runtime) Create(_ context.Context, id string, opts runtime.CreateOpts) error {
	s, err := r.spawn(id, opts, true, false, false)
	if err != nil {
		return err
	}
	s.io.closePostStart()
	return nil
}

// spawn creates the container and starts its init: blocked on the exec
// fifo (create) or running the user process (run).
func (r *Runtime) spawn(id string, o runtime.CreateOpts, detach, run, trackOut bool) (_ *started, retErr error) {
	if err := runtime.ValidateID(id); err != nil {
		return nil, err
	}
	r.Prepare()
	spec, bundle, err := loadSpec(o)
	if err != nil {
		return nil, err
	}
	if r.systemd {
		if err := checkSystemd(); err != nil {
			return nil, err
		}
	}
	if w := exeSealWarning(r.root); w != "" {
		r.warn(w) // once per container the caller starts (mcp serve: once)
	}
	useCgroups := r.CgroupLimits()
	if !useCgroups {
		if spec.Linux != nil && spec.Linux.Resources != nil {
			res := *spec.Linux.Resources
			if dropped := stripResources(&res); len(dropped) > 0 && !r.limitsReported {
				r.warn(fmt.Sprintf("cgroups are not delegated to uid %d: limits not applied: %s", os.Geteuid(), strings.Join(dropped, ", ")))
			}
			lin := *spec.Linux
			lin.Resources = &res
			spec.Linux = &lin
		}
	}
	if o.PidFile != "" {
		if o.PidFile, err = filepath.Abs(o.PidFile); err != nil {
			return nil, err
		}
	}

	// A guarded container (Guard) is created only once its guard runs:
	// from then on, this process' death cannot leave anything of it
	// (its lock file first) behind.
	if err := r.waitGuard(id); err != nil {
		return nil, err
	}
	lk, err := r.lock(id)
	if err != nil {
		return nil, err
	}
	defer func() {
		// A failed create leaves nothing behind, not even its lock file
		// (the inode re-check in lock makes removing it safe).
		if retErr != nil {
			lk.remove()
		} else {
			lk.unlock()
		}
	}()

	config, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{
		CgroupName:       id,
		UseSystemdCgroup: r.systemd,
		NoPivotRoot:      o.NoPivot,
		NoNewKeyring:     o.NoNewKeyring,
		Spec:             spec,
		RootlessEUID:     os.Geteuid() != 0,
		RootlessCgroups:  r.rootlessCgroups,
	})
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", bundle, err)
	}
	// specconv takes the bundle from the working directory; we never chdir.
	for i, l := range config.Labels {
		if strings.HasPrefix(l, "bundle=") {
			config.Labels[i] = "bundle=" + bundle
		}
	}
	for _, w := range relaxConfig(config) {
		r.warn(w)
	}
	egressSock := o.EgressSocket
	if egressSock == "" {
		// A plain bundle asking for the allowlist: a detached helper
		// serves it.
		sock, done, err := r.startEgressHelper(spec, id)
		if err != nil {
			return nil, err
		}
		defer func() { done(retErr == nil) }()
		egressSock = sock
	}
	handoff, err := egressHandoff(config, spec, egressSock)
	if err != nil {
		return nil, err
	}
	if handoff != nil {
		// The init has its own copy once started; the server sees the
		// end of the handoff when a create fails before the init does.
		defer handoff.Close()
	}
	hooks := takeHooks(config)
	shimPrestart(config)
	_, serr := os.Lstat(r.stateDir(id))
	existed := serr == nil
	c, err := libcontainer.Create(r.root, id, config)
	if err != nil {
		// A state directory Create made before failing is ours (we hold
		// the ID's lock); one that was there before is somebody's
		// container, whatever Create's error (it validates the config
		// before it looks).
		if !existed {
			os.RemoveAll(r.stateDir(id))
		}
		return nil, mapErr(err)
	}
	defer func() {
		if retErr != nil {
			_ = c.Destroy()
		}
	}()
	if err := saveHooks(r.stateDir(id), hooks); err != nil {
		return nil, err
	}
	if err := recordCgroups(r.stateDir(id), config.Cgroups); err != nil {
		return nil, err
	}

	p, err := newProcess(spec.Process, true, r.logLevel)
	if err != nil {
		return nil, err
	}
	if o.PreserveFDs > 0 {
		files, err := preservedFiles(o.PreserveFDs)
		if err != nil {
			return nil, err
		}
		p.ExtraFiles = append(p.ExtraFiles, files...)
	}
	p.ExtraFiles = append(p.ExtraFiles, o.ExtraFiles...)
	if handoff != nil {
		// Last: the init finds it just before libcontainer's own
		// descriptors (nsinit.FromInit).
		p.ExtraFiles = append(p.ExtraFiles, handoff)
	}
	pio, err := setupIO(p, spec.Process.Terminal, detach, o.ConsoleSocket, o.Stdio)
	if err != nil {
		return nil, err
	}
	if trackOut && !spec.Process.Terminal {
		if err := pio.trackOutput(p); err != nil {
			pio.close()
			return nil, err
		}
	}
	// Replaying the device rules in order happens between start and exec,
	// before any of the container's code runs.
	ordered := wantsDeviceOrder(spec, config)
	if run && !ordered {
		err = c.Run(p)
	} else {
		err = c.Start(p)
	}
	if err != nil {
		pio.close()
		return nil, mapErr(err)
	}
	if ordered {
		err := replayDevices(c, config)
		if err == nil && run {
			err = mapErr(c.Exec())
		}
		if err != nil {
			terminate(p)
			pio.close()
			return nil, err
		}
	}
	if err := pio.waitConsole(); err != nil {
		terminate(p)
		pio.close()
		return nil, err
	}
	pio.closePostStart()
	if o.PidFile != "" {
		pid, err := p.Pid()
		if err == nil {
			err = writePidFile(o.PidFile, pid)
		}
		if err != nil {
			terminate(p)
			pio.close()
			return nil, err
		}
	}
	if run {
		runPoststart(c, hooks, r.warn)
	}
	return &started{c: c, p: p, io: pio, limits: useCgroups}, nil
}

// readCgroups finds the container's cgroup folders for its exit report.
// Only a Run whose caller asks for the report pays for it: the state it
// comes from reads libcontainer's cgroup and namespace paths.
func (s *started) readCgroups() {
	st, err := s.c.State()
	if err != nil {
		return
	}
	s.cgroups = len(st.CgroupPaths) > 0 && s.limits
	s.memDir = st.CgroupPaths["memory"]
	s.pidsDir = st.CgroupPaths["pids"]
	if s.memDir == "" {
		s.memDir = st.CgroupPaths[""] // cgroup v2: one folder
	}
	if s.pidsDir == "" {
		s.pidsDir = st.CgroupPaths[""]
	}
	s.cpuDir = st.CgroupPaths["cpuacct"]
	if s.cpuDir == "" {
		s.cpuDir, s.cpuV2 = st.CgroupPaths[""], st.CgroupPaths[""] != ""
	}
}

// loadSpec returns a private copy of the spec with the root path and
// relative bind sources made absolute against the bundle, so libcontainer
// never depends on the working directory.
func loadSpec(o runtime.CreateOpts) (*specs.Spec, string, error) {
	bundle := o.Bundle
	if bundle == "" {
		bundle = "."
	}
	bundle, err := filepath.Abs(bundle)
	if err != nil {
		return nil, "", err
	}
	spec := o.Spec
	if spec == nil {
		if spec, err = runtime.LoadBundle(bundle); err != nil {
			return nil, "", err
		}
	} else {
		cp := *spec
		spec = &cp
		if err := runtime.ValidateProcess(spec.Process); err != nil {
			return nil, "", err
		}
		if spec.Root == nil || spec.Root.Path == "" {
			return nil, "", errors.New("root.path: must be set")
		}
	}
	if spec.Linux == nil {
		return nil, "", errors.New("linux: section missing: this runtime runs Linux containers")
	}
	root := *spec.Root
	if !filepath.IsAbs(root.Path) {
		root.Path = filepath.Join(bundle, root.Path)
	}
	spec.Root = &root
	mounts := make([]specs.Mount, len(spec.Mounts))
	copy(mounts, spec.Mounts)
	for i, m := range mounts {
		if m.Source != "" && !filepath.IsAbs(m.Source) && runtime.IsBind(m) {
			mounts[i].Source = filepath.Join(bundle, m.Source)
		}
	}
	spec.Mounts = mounts
	return spec, bundle, nil
}

// terminate kills a half-started process and reaps it.
func terminate(p *libcontainer.Process) {
	_ = p.Signal(unix.SIGKILL)
	_, _ = p.Wait()
}

// Start implements runtime.Runtime.
func (r *Runtime) Start(_ context.Context, id string) error {
	c, err := r.load(id)
	if err != nil {
		return err
	}
	status, err := c.Status()
	if err != nil {
		return mapErr(err)
	}
	switch status {
	case libcontainer.Created:
		hooks, err := loadHooks(r.stateDir(id))
		if err != nil {
			return err
		}
		if err := c.Exec(); err != nil {
			return mapErr(err)
		}
		runPoststart(c, hooks, r.warn)
		return nil
	case libcontainer.Stopped:
		return errors.New("cannot start a container that has stopped")
	case libcontainer.Running:
		return errors.New("cannot start an already running container")
	default:
		return fmt.Errorf("cannot start a container in the %s state", status)
	}
}

// Run implements runtime.Runtime.
func (r *Runtime) Run(ctx context.Context, id string, o runtime.RunOpts) (int, error) {
	begin := time.Now()
	early := o.Report != nil && !o.Detach && o.Exit != nil && o.Exited != nil
	s, err := r.spawn(id, o.CreateOpts, o.Detach, true, early)
	if err != nil {
		return -1, err
	}
	if o.Detach {
		s.io.closePostStart()
		return 0, nil
	}
	// A deadline kills the whole container: SIGKILL to a pid-namespace
	// init kills the namespace, and with a shared one libcontainer kills
	// every process of the cgroup.
	killAll := func() {
		if err := s.c.Signal(unix.SIGKILL); err != nil {
			_ = s.p.Signal(unix.SIGKILL)
		}
	}
	if o.Exit != nil {
		// The program runs: its memory peak starts now, without the
		// runtime's own init (a Go process) before its exec. Without a
		// report to fill (the OCI verbs), nothing reads the cgroups.
		s.readCgroups()
		early = early && s.cgroups && s.cpuDir != ""
		s.usage = openUsage(s, early)
	}
	// Exit and Exited once: from the program's reported status (Report)
	// or after the wait, whichever comes first.
	var (
		exitMu sync.Mutex
		exited bool
	)
	exitOnce := func(fill func(*runtime.ExitInfo) bool, err error) {
		exitMu.Lock()
		defer exitMu.Unlock()
		if exited {
			return
		}
		if o.Exit != nil && !fill(o.Exit) {
			return
		}
		exited = true
		if o.Exited != nil {
			o.Exited(err)
		}
	}
	if early {
		o.Report(func(status int) {
			// The program's output, all of it: its writers are gone (the
			// holder closed its own copies before it reported).
			s.io.waitOutput()
			exitOnce(func(e *runtime.ExitInfo) bool { return fillReported(e, s, status, time.Since(begin)) }, nil)
		})
	}
	if o.Started != nil {
		if pid, err := s.p.Pid(); err == nil {
			o.Started(pid)
		}
	}
	status, ps, werr := wait(ctx, s.p, s.io, o.Signals, killAll)
	s.io.close()
	exitOnce(func(e *runtime.ExitInfo) bool { fillExit(e, s, ps, status, time.Since(begin)); return true }, werr)
	// Filled: a report coming later finds the exit done and reads nothing.
	exitMu.Lock()
	s.usage.close()
	exitMu.Unlock()
	if !o.Keep {
		if err := r.destroy(id, s.c); err != nil && werr == nil {
			werr = err
		}
	}
	return status, werr
}

// destroy removes a container's state, cgroups and lock.
func (r *Runtime) destroy(id string, c *libcontainer.Container) error {
	lk, lerr := r.lockExisting(id)
	err := destroyContainer(c, r.stateDir(id), r.warn)
	if lerr == nil {
		lk.remove()
	}
	return err
}

// wait waits for p, forwarding signals and calling kill when ctx ends. The
// loop is event-driven: it wakes on exit, signal or ctx only.
func wait(ctx context.Context, p *libcontainer.Process, pio *procIO, sigs <-chan os.Signal, kill func()) (int, *os.ProcessState, error) {
	type result struct {
		ps  *os.ProcessState
		err error
	}
	done := make(chan result, 1)
	go func() {
		ps, err := p.Wait()
		done <- result{ps, err}
	}()
	pio.resize()
	var ctxErr error
	ctxDone := ctx.Done()
	for {
		select {
		case res := <-done:
			if res.ps == nil {
				return -1, nil, fmt.Errorf("wait for container process: %w", res.err)
			}
			return exitStatus(res.ps), res.ps, ctxErr
		case s := <-sigs:
			switch s {
			case unix.SIGWINCH:
				pio.resize()
			case unix.SIGCHLD, unix.SIGURG, unix.SIGPIPE:
			default:
				_ = p.Signal(s)
			}
		case <-ctxDone:
			ctxDone = nil
			ctxErr = fmt.Errorf("container killed: %w", ctx.Err())
			kill()
		}
	}
}
