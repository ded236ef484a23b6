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
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

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
