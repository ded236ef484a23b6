//go:build linux

package linux

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/moby/sys/user"
	"github.com/opencontainers/runc/libcontainer"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/runtime"
)

// killTimeout bounds how long delete --force waits for a killed init.
const killTimeout = 10 * time.Second

// Delete implements runtime.Runtime with runc's semantics: a stopped
// container is removed, a created one killed first, a running or paused
// one only with force.
func (r *Runtime) Delete(_ context.Context, id string, force bool) error {
	if err := runtime.ValidateID(id); err != nil {
		return err
	}
	lk, err := r.lockExisting(id)
	if errors.Is(err, errNoContainer) {
		// Nothing of it: no lock file is made to find that out.
		if force {
			return nil
		}
		return mapErr(libcontainer.ErrNotExist)
	}
	if err != nil {
		return err
	}
	c, err := loadContainer(r.root, id)
	if err != nil {
		if errors.Is(err, libcontainer.ErrNotExist) {
			// A create killed before state.json was written leaves a
			// directory libcontainer cannot load, and maybe cgroups and
			// a half-set-up init: remove them.
			if rerr := removeOrphan(r.stateDir(id)); rerr != nil {
				lk.unlock()
				return rerr
			}
			if err != libcontainer.ErrNotExist {
				r.warn(fmt.Sprintf("removed an unusable state directory: %v", err))
			}
			lk.remove()
			if force {
				return nil
			}
		} else {
			lk.unlock()
		}
		return mapErr(err)
	}
	if force {
		err = killAndDestroy(c, r.stateDir(id), r.warn)
	} else {
		var status libcontainer.Status
		status, err = c.Status()
		switch {
		case err != nil:
			err = mapErr(err)
		case status == libcontainer.Stopped:
			err = destroyContainer(c, r.stateDir(id), r.warn)
		case status == libcontainer.Created:
			err = killAndDestroy(c, r.stateDir(id), r.warn)
		default:
			err = fmt.Errorf("cannot delete container %s that is not stopped: %s", id, status)
		}
	}
	if err == nil {
		lk.remove()
	} else {
		lk.unlock()
	}
	return err
}

// killAndDestroy SIGKILLs the container, waits for its init to die (a
// pidfd, not a polling loop) and removes it.
func killAndDestroy(c *libcontainer.Container, stateDir string, warn func(string)) error {
	st, err := c.State()
	if err != nil {
		return mapErr(err)
	}
	pidfd := -1
	if pid := st.InitProcessPid; pid > 0 {
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			pidfd = fd
			defer unix.Close(fd)
		}
	}
	if err := c.Signal(unix.SIGKILL); err == nil && pidfd >= 0 {
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, int(killTimeout/time.Millisecond))
			if err == unix.EINTR {
				continue
			}
			if err == nil && n == 0 {
				return errors.New("container init still running")
			}
			break
		}
	}
	return destroyContainer(c, stateDir, warn)
}

// Kill implements runtime.Runtime.
func (r *Runtime) Kill(_ context.Context, id string, sig syscall.Signal, all bool) error {
	c, err := r.load(id)
	if err != nil {
		return err
	}
	if all {
		err = signalAll(c, sig)
		if errors.Is(err, libcontainer.ErrNotRunning) {
			return nil
		}
		return mapErr(err)
	}
	return mapErr(c.Signal(sig))
}

// signalAll signals every process of the container's cgroup, or the init
// alone when there is no cgroup to read (rootless without delegation; in
// a private pid namespace SIGKILL to the init still kills them all).
func signalAll(c *libcontainer.Container, sig syscall.Signal) error {
	pids, err := c.Processes()
	if err != nil || len(pids) == 0 {
		return c.Signal(sig)
	}
	if sig == unix.SIGKILL {
		if err := c.Signal(sig); err != nil { // thaws a paused cgroup
			return err
		}
	}
	for _, pid := range pids {
		if err := unix.Kill(pid, sig); err != nil && err != unix.ESRCH {
			return fmt.Errorf("signal pid %d: %w", pid, err)
		}
	}
	return nil
}

// Exec implements runtime.Runtime.
func (r *Runtime) Exec(ctx context.Context, id string, o runtime.ExecOpts) (int, error) {
	if err := runtime.ValidateProcess(o.Process); err != nil {
		return -1, err
	}
	c, err := r.load(id)
	if err != nil {
		return -1, err
	}
	status, err := c.Status()
	if err != nil {
		return -1, mapErr(err)
	}
	switch status {
	case libcontainer.Stopped:
		return -1, errors.New("cannot exec in a stopped container")
	case libcontainer.Paused:
		if !o.IgnorePaused {
			return -1, errors.New("cannot exec in a paused container (use --ignore-paused to override)")
		}
	}
	p, err := newProcess(o.Process, false, r.logLevel)
	if err != nil {
		return -1, err
	}
	p.SubCgroupPaths = o.SubCgroupPaths
	if o.PreserveFDs > 0 {
		files, err := preservedFiles(o.PreserveFDs)
		if err != nil {
			return -1, err
		}
		p.ExtraFiles = append(p.ExtraFiles, files...)
	}
	pio, err := setupIO(p, o.Process.Terminal, o.Detach, o.ConsoleSocket, o.Stdio)
	if err != nil {
		return -1, err
	}
	if err := c.Run(p); err != nil {
		pio.close()
		return -1, mapErr(err)
	}
	if err := pio.waitConsole(); err != nil {
		terminate(p)
		pio.close()
		return -1, err
	}
	pio.closePostStart()
	if o.PidFile != "" {
		path, err := filepath.Abs(o.PidFile)
		if err == nil {
			var pid int
			if pid, err = p.Pid(); err == nil {
				err = writePidFile(path, pid)
			}
		}
		if err != nil {
			terminate(p)
			pio.close()
			return -1, err
		}
	}
	if o.Detach {
		return 0, nil
	}
	// A deadline kills the exec'd process, not the container.
	code, _, err := wait(ctx, p, pio, o.Signals, func() { _ = p.Signal(unix.SIGKILL) })
	pio.close()
	return code, err
}

// Ps implements runtime.Runtime.
func (r *Runtime) Ps(_ context.Context, id string) ([]int, error) {
	c, err := r.load(id)
	if err != nil {
		return nil, err
	}
	pids, err := c.Processes()
	if err != nil {
		return nil, mapErr(err)
	}
	return pids, nil
}

// Pause implements runtime.Runtime.
func (r *Runtime) Pause(_ context.Context, id string) error {
	return r.locked(id, func(c *libcontainer.Container) error { return c.Pause() })
}

// Resume implements runtime.Runtime.
func (r *Runtime) Resume(_ context.Context, id string) error {
	return r.locked(id, func(c *libcontainer.Container) error { return c.Resume() })
}

// locked runs fn on the loaded container under its lock.
func (r *Runtime) locked(id string, fn func(*libcontainer.Container) error) error {
	if err := runtime.ValidateID(id); err != nil {
		return err
	}
	c, err := r.load(id)
	if err != nil {
		return err
	}
	lk, err := r.lockExisting(id)
	if errors.Is(err, errNoContainer) {
		return mapErr(libcontainer.ErrNotExist) // deleted since it was loaded
	}
	if err != nil {
		return err
	}
	defer lk.unlock()
	return mapErr(fn(c))
}

// Update implements runtime.Runtime: the non-nil fields of res replace the
// container's current limits.
func (r *Runtime) Update(_ context.Context, id string, res *specs.LinuxResources) error {
	return r.locked(id, func(c *libcontainer.Container) error {
		status, err := c.Status()
		if err != nil {
			return err
		}
		if status == libcontainer.Stopped {
			return fmt.Errorf("cannot update a stopped container")
		}
		config := c.Config()
		if config.Cgroups == nil || config.Cgroups.Resources == nil {
			return errors.New("container has no cgroup configuration to update")
		}
		if err := applyResources(config.Cgroups.Resources, res); err != nil {
			return err
		}
		return c.Set(config)
	})
}

// userName resolves a uid as runc's list shows owners.
func userName(uid int) string {
	if u, err := user.LookupUid(uid); err == nil {
		return u.Name
	}
	return "#" + strconv.Itoa(uid)
}
