package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/runtime"
)

// bundlePrefix starts the name of every bundle folder skill run makes.
const bundlePrefix = "skillrun-"

// ownerSuffix names, next to a bundle folder, the file that holds the ID
// of the run's container and an exclusive flock for as long as the run's
// process lives. It exists before the folder does and goes after it.
const ownerSuffix = ".owner"

// owned is a claimed bundle folder: its path and the locked owner file.
type owned struct {
	dir   string
	owner *os.File
}

// newBundleDir claims a fresh bundle folder in tmp for container id. The
// owner file is made, locked and filled before it gets its name (an
// O_TMPFILE linked into place), and only then is the folder created:
// whenever a run dies, SIGKILL included, what it leaves is found through
// an unlocked owner file, a live run's is never seen unlocked, and no
// folder exists without one.
func newBundleDir(tmp, skill, id string) (*owned, error) {
	dir, err := bundleName(tmp, skill)
	if err != nil {
		return nil, err
	}
	return claimBundleDir(dir, id)
}

// bundleName picks a fresh bundle folder name in tmp (nothing is made).
func bundleName(tmp, skill string) (string, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", fmt.Errorf("bundle folder: %w", err)
	}
	return filepath.Join(tmp, bundlePrefix+skill+"-"+hex.EncodeToString(rnd[:])), nil
}

// claimBundleDir claims the bundle folder dir (from bundleName) for
// container id, as newBundleDir does.
func claimBundleDir(dir, id string) (*owned, error) {
	f, err := lockedFile(dir+ownerSuffix, id)
	if err != nil {
		return nil, fmt.Errorf("bundle folder: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		os.Remove(dir + ownerSuffix)
		f.Close()
		return nil, fmt.Errorf("bundle folder: %w", err)
	}
	return &owned{dir: dir, owner: f}, nil
}

// lockedFile creates name holding data, flock'ed by the returned file
// before anyone can open it by name: an unnamed O_TMPFILE linked into
// place, or, where the file system has no O_TMPFILE, a temporary name
// renamed (collectStale gives those a grace period).
func lockedFile(name, data string) (*os.File, error) {
	lock := func(f *os.File) error {
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			return err
		}
		_, err := f.WriteString(data)
		return err
	}
	fd, err := openTmpfile(filepath.Dir(name))
	if err == nil {
		f := os.NewFile(uintptr(fd), name)
		if err := lock(f); err != nil {
			f.Close()
			return nil, err
		}
		if err := unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, name, unix.AT_SYMLINK_FOLLOW); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_RDWR|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := lock(f); err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return f, nil
}

// release removes the folder, then the owner file, then drops the lock.
// A folder that cannot be removed keeps its owner file, unlocked: the
// next collection finds it.
func (o *owned) release() {
	if os.RemoveAll(o.dir) == nil {
		os.Remove(o.dir + ownerSuffix)
	}
	o.owner.Close()
}

// collectStale removes what runs killed before their own clean-up left:
// for each owner file in tmp that is ours and not locked (its process is
// gone), it force-deletes the container it names and removes the bundle
// folder and the file. Live runs and other users' files are left alone.
// Errors are ignored: this is housekeeping, the run goes on.
func collectStale(ctx context.Context, rt runtime.Runtime, tmp string) {
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, bundlePrefix) {
			continue
		}
		base, ok := strings.CutSuffix(name, ownerSuffix)
		if !ok {
			base, ok = strings.CutSuffix(name, ownerSuffix+".tmp")
		}
		if !ok {
			continue
		}
		file := filepath.Join(tmp, name)
		if strings.HasSuffix(name, ".tmp") && !olderThan(file, tmpGrace) {
			continue // maybe a live run between creating and locking it
		}
		id, stale := staleOwner(file)
		if !stale {
			continue
		}
		if id != "" {
			_ = rt.Delete(ctx, id, true)
		}
		// The owner file goes only with its folder: a folder that could
		// not be removed now is found again next time.
		if os.RemoveAll(filepath.Join(tmp, base)) == nil {
			_ = os.Remove(file)
		}
	}
}

// staleOwner reports whether the owner file is ours and unlocked (its run
// is gone), and the container ID it recorded.
func staleOwner(file string) (string, bool) {
	f, err := os.OpenFile(file, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || int(st.Uid) != os.Geteuid() || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", false
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return "", false // a live run holds it (EWOULDBLOCK), or we cannot tell
	}
	buf := make([]byte, runtime.MaxIDLength+1)
	n, _ := f.Read(buf)
	id := string(buf[:n])
	if runtime.ValidateID(id) != nil {
		return "", true
	}
	return id, true
}

// tmpGrace is how old a temporary owner file (file systems without
// O_TMPFILE) must be before it counts as left by a dead run.
const tmpGrace = time.Minute

func olderThan(name string, d time.Duration) bool {
	fi, err := os.Lstat(name)
	return err == nil && time.Since(fi.ModTime()) > d
}

// CollectStale is the clean-up every Run does first, on its own: it
// force-deletes the containers and removes the bundle folders that runs
// killed before their own clean-up (SIGKILL, crash) left in tmp (""
// means DefaultTempDir()). A long-lived server calls it at start so that
// what its killed predecessor left goes before the first call.
func CollectStale(ctx context.Context, rt runtime.Runtime, tmp string) {
	if tmp == "" {
		tmp = DefaultTempDir()
	}
	collectStale(ctx, rt, tmp)
}
