//go:build linux

package linux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"
)

// lockDirName holds the per-container lock files. '@' is not in the ID
// alphabet, so no container's state directory can collide with it.
const lockDirName = "@locks"

// idLock is an exclusive flock on <root>/@locks/<id>. It serialises the
// mutating verbs (create, start, delete, pause, resume, update) across
// processes, so two callers can't race on one container.
type idLock struct {
	f    *os.File
	path string
}

// errNoContainer is lockExisting's answer when container id has neither
// a lock file nor a state folder: there is nothing to lock.
var errNoContainer = fmt.Errorf("%w (no lock file and no state folder)", libcontainer.ErrNotExist)

// lock takes the container's lock for its create, making the lock file
// when there is none, and waits for the current holder. The lock file
// can be removed by delete while we wait on the old inode; we then retry
// on the new one, so two holders never coexist.
//
// Only create makes a lock file for a container that does not exist: its
// caller registered the ID with its lifetime guard first, so whenever it
// dies the guard finds the file. Every other verb takes lockExisting.
func (r *Runtime) lock(id string) (*idLock, error) { return r.takeLock(id, true) }

// lockExisting takes the lock of an existing container (delete, pause,
// resume, update, the removal at the end of a run): it joins the lock
// file its create made and never makes one for a container that has
// neither a lock file nor a state folder (errNoContainer). A process
// that dies holding it leaves no file that was not there already: a
// live runner that deletes a dead runner's container (collectStale)
// after that runner's guard removed it must not leave a lock file no
// guard knows of.
func (r *Runtime) lockExisting(id string) (*idLock, error) { return r.takeLock(id, false) }

func (r *Runtime) takeLock(id string, create bool) (*idLock, error) {
	if create {
		if err := r.ensureRoot(); err != nil {
			return nil, err
		}
	} else if _, err := os.Lstat(r.root); errors.Is(err, os.ErrNotExist) {
		return nil, errNoContainer
	} else if err := r.ensureRoot(); err != nil { // the owner check only
		return nil, err
	}
	dir := filepath.Join(r.root, lockDirName)
	path := filepath.Join(dir, id)
	for attempt := 0; ; attempt++ {
		flags := os.O_RDWR | unix.O_CLOEXEC | unix.O_NOFOLLOW
		if !create {
			f, err := os.OpenFile(path, flags, 0)
			if errors.Is(err, os.ErrNotExist) {
				// No lock file. Deleters remove the state folder before
				// the lock file, and create makes the lock file first:
				// without a state folder the container is gone (or not
				// begun). A state folder without a lock file is one made
				// before lock files were: that container's lock is made.
				if _, serr := os.Lstat(r.stateDir(id)); serr != nil {
					return nil, errNoContainer
				}
			} else if err != nil {
				return nil, fmt.Errorf("open lock: %w", err)
			} else if l, ok, err := holdLock(f, path, id); err != nil || ok {
				return l, err
			} else {
				continue // removed or replaced while we waited: retry
			}
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			if errors.Is(err, os.ErrExist) && attempt < 100 {
				continue // removed by another remove() between mkdir and stat
			}
			return nil, fmt.Errorf("create lock dir: %w", err)
		}
		f, err := os.OpenFile(path, os.O_CREATE|flags, 0o600)
		if errors.Is(err, os.ErrNotExist) && attempt < 100 {
			continue // the last remove() took the empty lock dir away
		}
		if err != nil {
			return nil, fmt.Errorf("open lock: %w", err)
		}
		if l, ok, err := holdLock(f, path, id); err != nil || ok {
			return l, err
		}
		// removed or replaced while we waited: retry
	}
}

// holdLock flocks f, the lock file opened at path, and reports whether it
// is still the file at path (ok); f is closed unless it is returned.
func holdLock(f *os.File, path, id string) (_ *idLock, ok bool, _ error) {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("lock %s: %w", id, err)
	}
	var held, now unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &held); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("lock %s: %w", id, err)
	}
	if err := unix.Stat(path, &now); err == nil && now.Ino == held.Ino && now.Dev == held.Dev {
		return &idLock{f: f, path: path}, true, nil
	}
	f.Close()
	return nil, false, nil
}

// unlock releases the lock.
func (l *idLock) unlock() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// remove deletes the lock file (the container is gone) and releases it,
// and the lock directory once empty, so a state root whose containers are
// all deleted is empty again (containerd's shim checks).
func (l *idLock) remove() {
	if l != nil && l.f != nil {
		os.Remove(l.path)
		l.unlock()
		os.Remove(filepath.Dir(l.path)) // fails while other locks exist
	}
}
