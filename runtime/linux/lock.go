//go:build linux

package linux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

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

// lock takes the container's lock, waiting for the current holder. The
// lock file can be removed by delete while we wait on the old inode; we
// then retry on the new one, so two holders never coexist.
func (r *Runtime) lock(id string) (*idLock, error) {
	if err := r.ensureRoot(); err != nil {
		return nil, err
	}
	dir := filepath.Join(r.root, lockDirName)
	path := filepath.Join(dir, id)
	for attempt := 0; ; attempt++ {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			if errors.Is(err, os.ErrExist) && attempt < 100 {
				continue // removed by another remove() between mkdir and stat
			}
			return nil, fmt.Errorf("create lock dir: %w", err)
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
		if errors.Is(err, os.ErrNotExist) && attempt < 100 {
			continue // the last remove() took the empty lock dir away
		}
		if err != nil {
			return nil, fmt.Errorf("open lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", id, err)
		}
		var held, now unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &held); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", id, err)
		}
		if err := unix.Stat(path, &now); err == nil && now.Ino == held.Ino && now.Dev == held.Dev {
			return &idLock{f: f, path: path}, nil
		}
		f.Close() // removed or replaced while we waited: retry
	}
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
