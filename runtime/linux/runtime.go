//go:build linux

package linux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"

	"github.com/moby/sys/userns"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/utils"
	"github.com/sirupsen/logrus"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/linux/devdir"
)

// Runtime is the libcontainer back end. It holds only configuration and is
// safe for concurrent use; per-container exclusion is a file lock in the
// state root, so it also holds across processes.
type Runtime struct {
	root            string
	systemd         bool
	rootlessCgroups bool
	warn            func(string)
	// limitsReported: the caller reports the limits each container got
	// (runtime.Options.LimitsReported): no warning for dropped ones.
	limitsReported bool
	// logLevel is passed to libcontainer's init (_LIBCONTAINER_LOGLEVEL);
	// "" leaves its default.
	logLevel string
	prepared sync.Once
	// guards is this runtime's lifetime guard client (Guard); nil in a
	// Runtime the guard process itself makes, which never guards.
	guards *guardClient
	// egressHelper names the program started as a container's egress
	// server (runtime.Options.EgressHelper; nil: /proc/self/exe).
	egressHelper func() (string, error)
}

var (
	_ runtime.Runtime        = (*Runtime)(nil)
	_ runtime.Preparer       = (*Runtime)(nil)
	_ runtime.DevDirProvider = (*Runtime)(nil)
	_ runtime.Guarder        = (*Runtime)(nil)
	_ runtime.SelfExecer     = (*Runtime)(nil)
)

// DevDir implements runtime.DevDirProvider (see HostDevices).
func (r *Runtime) DevDir() string { return HostDevices{}.DevDir() }

// SelfExe implements runtime.SelfExecer: a container's init is this
// binary (libcontainer re-executes it as `BINARY init`, from a sealed
// copy or a read-only overlay of it), and its /proc/self/exe, a magic
// link, reaches that copy from inside the container.
func (r *Runtime) SelfExe() string { return "/proc/self/exe" }

// HostDevices is the host's prepared device folder (package devdir) as a
// runtime.DevDirProvider, for callers that write bundles without a back
// end (skillrun skill bundle). DevDir checks the folder on every call (a
// few fstatat) and makes it when missing or wrong and this process is
// root.
type HostDevices struct{}

// DevDir implements runtime.DevDirProvider.
func (HostDevices) DevDir() string {
	if devdir.Ensure(devdir.HostDir) != nil {
		return ""
	}
	return devdir.HostDir
}

// Prepare implements runtime.Preparer: as root with the cgroupfs driver it
// starts paying, in the background, the RCU grace period the container's
// first cgroup migration would otherwise wait for (see
// prewarmCgroupAttach). Only the first call does anything.
func (r *Runtime) Prepare() {
	r.prepared.Do(func() {
		if os.Geteuid() == 0 && !r.systemd {
			prewarmCgroupAttach()
		}
	})
}

// New returns the libcontainer back end for opts. It creates the state root
// (0700) and refuses one owned by another user.
func New(opts runtime.Options) (*Runtime, error) {
	if opts.Root == "" {
		return nil, errors.New("state root not set")
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("state root %q: %w", opts.Root, err)
	}
	rc, err := rootlessCgroups(opts.Rootless)
	if err != nil {
		return nil, err
	}
	r := &Runtime{root: root, systemd: opts.SystemdCgroup, rootlessCgroups: rc, warn: opts.Warn, limitsReported: opts.LimitsReported,
		guards: newGuardClient("/proc/self/exe"), egressHelper: opts.EgressHelper}
	if r.warn == nil {
		r.warn = func(string) {}
	}
	if opts.Debug {
		r.logLevel = strconv.Itoa(int(logrus.DebugLevel))
	}
	if opts.DelegatedScope && !r.systemd && !r.CgroupLimits() {
		if ok, _ := userScopeAvailable(); ok {
			r.systemd = true
		}
	}
	return r, nil
}

// rootlessCgroups decides, like runc, whether cgroup permission errors are
// ignored: the --rootless flag when true/false, else whether we are an
// unprivileged user (or root inside a user namespace).
func rootlessCgroups(flag string) (bool, error) {
	switch flag {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "", "auto":
	default:
		return false, fmt.Errorf("invalid --rootless value %q (want true, false or auto)", flag)
	}
	if os.Geteuid() != 0 {
		return true, nil
	}
	return userns.RunningInUserNS(), nil
}

// ensureRoot creates the state root for writing. An unprivileged user's
// root must belong to that user: a root planted by someone else could
// redirect state.
func (r *Runtime) ensureRoot() error {
	if err := os.MkdirAll(r.root, 0o700); err != nil {
		return fmt.Errorf("create state root: %w", err)
	}
	fi, err := os.Stat(r.root)
	if err != nil {
		return fmt.Errorf("state root: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && os.Geteuid() != 0 {
		return fmt.Errorf("state root %s is owned by uid %d, not by the current user %d", r.root, st.Uid, os.Geteuid())
	}
	return nil
}

// load opens an existing container, with runc's error wording.
func (r *Runtime) load(id string) (*libcontainer.Container, error) {
	if err := runtime.ValidateID(id); err != nil {
		return nil, err
	}
	c, err := loadContainer(r.root, id)
	if err != nil {
		return nil, mapErr(err)
	}
	return c, nil
}

// loadContainer is libcontainer.Load behind checks of the state file:
// libcontainer opens it with a plain open, which blocks forever on a FIFO
// planted (or left) in its place, reads any size, and dereferences a
// "null" document. Only a regular file of at most maxStateSize holding a
// JSON object reaches it. A state directory without a usable state file
// is reported as not existing (as libcontainer does for a missing one),
// with the reason, so list skips it and delete --force removes it.
func loadContainer(root, id string) (_ *libcontainer.Container, err error) {
	name := filepath.Join(root, id, "state.json")
	fi, err := os.Lstat(name)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, libcontainer.ErrNotExist
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s/state.json is not a regular file (%s)", libcontainer.ErrNotExist, id, fi.Mode().Type())
	case fi.Size() > maxStateSize:
		return nil, fmt.Errorf("%w: %s/state.json: larger than %d bytes", libcontainer.ErrNotExist, id, maxStateSize)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var head struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(data, &head); err != nil || head.ID != id {
		return nil, fmt.Errorf("%w: %s/state.json is corrupt", libcontainer.ErrNotExist, id)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s/state.json: %v", libcontainer.ErrNotExist, id, p)
		}
	}()
	return libcontainer.Load(root, id)
}

// maxStateSize bounds state.json; libcontainer's are a few KiB.
const maxStateSize = 16 << 20

// State implements runtime.Runtime.
func (r *Runtime) State(_ context.Context, id string) (*runtime.State, error) {
	c, err := r.load(id)
	if err != nil {
		return nil, err
	}
	return stateOf(c)
}

func stateOf(c *libcontainer.Container) (*runtime.State, error) {
	st, err := c.State()
	if err != nil {
		return nil, mapErr(err)
	}
	status, err := c.Status()
	if err != nil {
		return nil, mapErr(err)
	}
	pid := st.BaseState.InitProcessPid
	if status == libcontainer.Stopped {
		pid = 0
	}
	bundle, annotations := utils.Annotations(st.Config.Labels)
	return &runtime.State{
		OCIVersion:  st.Config.Version,
		ID:          st.BaseState.ID,
		Pid:         pid,
		Status:      status.String(),
		Bundle:      bundle,
		Rootfs:      st.BaseState.Config.Rootfs,
		Created:     st.BaseState.Created,
		Annotations: annotations,
		Owner:       "",
	}, nil
}

// List implements runtime.Runtime. Entries that are not containers or
// cannot be read (a create killed halfway) are skipped with a warning.
func (r *Runtime) List(_ context.Context) ([]runtime.State, []error, error) {
	ents, err := os.ReadDir(r.root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("read state root: %w", err)
	}
	var (
		out   []runtime.State
		warns []error
	)
	for _, e := range ents {
		if !e.IsDir() || runtime.ValidateID(e.Name()) != nil {
			continue
		}
		c, err := loadContainer(r.root, e.Name())
		if err != nil {
			warns = append(warns, fmt.Errorf("skip %s: %w", e.Name(), mapErr(err)))
			continue
		}
		st, err := stateOf(c)
		if err != nil {
			warns = append(warns, fmt.Errorf("skip %s: %w", e.Name(), err))
			continue
		}
		if uid, ok := ownerUID(filepath.Join(r.root, e.Name())); ok {
			st.Owner = uid
		}
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, warns, nil
}

// ownerUID returns the owner of a state directory as runc's list shows it:
// the user name when it resolves, else "#uid".
func ownerUID(dir string) (string, bool) {
	fi, err := os.Stat(dir)
	if err != nil {
		return "", false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	return userName(int(st.Uid)), true
}

// libErr pairs a libcontainer error with the runtime sentinel of the same
// meaning, so callers can match either and the text stays libcontainer's.
type libErr struct {
	err      error
	sentinel error
}

func (e *libErr) Error() string   { return e.err.Error() }
func (e *libErr) Unwrap() []error { return []error{e.sentinel, e.err} }

// mapErr makes libcontainer's sentinels match runtime's.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	for _, p := range [...]struct{ lib, rt error }{
		{libcontainer.ErrNotExist, runtime.ErrNotExist},
		{libcontainer.ErrExist, runtime.ErrExist},
		{libcontainer.ErrNotRunning, runtime.ErrNotRunning},
		{libcontainer.ErrRunning, runtime.ErrRunning},
		{libcontainer.ErrPaused, runtime.ErrPaused},
		{libcontainer.ErrNotPaused, runtime.ErrNotPaused},
		{libcontainer.ErrInvalidID, runtime.ErrInvalidID},
	} {
		if errors.Is(err, p.lib) {
			return &libErr{err: err, sentinel: p.rt}
		}
	}
	return err
}

// stateDir is the directory libcontainer keeps a container's state in.
func (r *Runtime) stateDir(id string) string { return filepath.Join(r.root, id) }
