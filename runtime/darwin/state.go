//go:build darwin || linux

package darwin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/skillrun/skillrun/internal/safefs"
	"github.com/skillrun/skillrun/runtime"
)

// Files in a container's directory, <root>/<id>/.
const (
	lockName    = "lock"
	stateName   = "state.json"
	fifoName    = "exec.fifo"
	profileName = "profile.sb"
	scratchName = "scratch"
)

// errNoProcess reports that a PID names no process.
var errNoProcess = errors.New("no such process")

// containerState is what state.json holds: runc's state plus what the back
// end needs to recognise its processes.
type containerState struct {
	runtime.State
	// StartTime identifies the init beyond its PID (PIDs are reused).
	StartTime uint64 `json:"skillrun_start_time"`
	// Command is the argv the init execs (sandbox-exec and its -D
	// parameters), recorded for debugging denials.
	Command []string `json:"skillrun_command"`
	// Network says whether the profile allows network access.
	Network bool `json:"skillrun_network"`
}

func (e *engine) dir(id string) string { return filepath.Join(e.root, id) }

// lock takes the per-ID lock of an existing container. It fails with
// runtime.ErrNotExist when the container does not exist or was deleted
// while waiting for the lock.
func (e *engine) lock(id string) (unlock func(), err error) {
	if err := runtime.ValidateID(id); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(e.dir(id), lockName), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("container %q: %w", id, runtime.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("lock container %q: %w", id, err)
	}
	if err := flock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock container %q: %w", id, err)
	}
	// Deleted between open and flock: the directory is gone.
	if _, err := os.Stat(filepath.Join(e.dir(id), stateName)); errors.Is(err, fs.ErrNotExist) {
		f.Close()
		return nil, fmt.Errorf("container %q: %w", id, runtime.ErrNotExist)
	}
	return func() { f.Close() }, nil
}

func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// load reads a container's state file.
func (e *engine) load(id string) (*containerState, error) {
	if err := runtime.ValidateID(id); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(e.dir(id), stateName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("container %q: %w", id, runtime.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("read state of container %q: %w", id, err)
	}
	var st containerState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("read state of container %q: %w", id, err)
	}
	return &st, nil
}

func (e *engine) save(st *containerState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("write state of container %q: %w", st.ID, err)
	}
	if err := safefs.WriteFileDurable(filepath.Join(e.dir(st.ID), stateName), b, 0o600); err != nil {
		return fmt.Errorf("write state of container %q: %w", st.ID, err)
	}
	return nil
}

// initAlive reports whether the container's init (or what it exec'd)
// still runs: the PID exists, is not a zombie, and started when the
// recorded process did.
func initAlive(st *containerState) bool {
	if st.Pid <= 0 {
		return false
	}
	start, zombie, err := procInfo(st.Pid)
	return err == nil && !zombie && start == st.StartTime
}

// status computes the container's status as runc does: stopped once the
// init is gone, created while the exec fifo exists, running otherwise.
func (e *engine) status(st *containerState) string {
	if !initAlive(st) {
		return runtime.StatusStopped
	}
	if _, err := os.Lstat(filepath.Join(e.dir(st.ID), fifoName)); err == nil {
		return runtime.StatusCreated
	}
	return runtime.StatusRunning
}

// groupIsOurs reports whether the process group named by the init's PID
// may still hold the container's processes: the init itself lives, or no
// process has that PID any more (a PID cannot be reused while a group of
// that ID has members, so surviving members are ours).
func groupIsOurs(st *containerState) bool {
	if st.Pid <= 0 {
		return false
	}
	start, _, err := procInfo(st.Pid)
	if errors.Is(err, errNoProcess) {
		return true
	}
	return err == nil && start == st.StartTime
}

// removeAll removes a container directory, making directories the
// sandboxed process left read-only writable first if needed.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
