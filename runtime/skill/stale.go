package skill

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/runtime"
)

// bundlePrefix starts the name of every bundle folder skill run makes.
const bundlePrefix = "skillrun-"

// ownerFile, in a bundle folder, holds the ID of the run's container and
// an exclusive flock for as long as the run's process lives.
const ownerFile = ".skillrun-owner"

// claimBundle marks dir as the live bundle of container id: the flock it
// takes goes away with the process, however it dies, so a later run can
// tell a folder whose run was killed (SIGKILL leaves no chance to clean
// up) from one in use.
//
// The file is locked under a temporary name and renamed into place, so a
// concurrent collectStale never finds it unlocked.
func claimBundle(dir, id string) (*os.File, error) {
	tmp := filepath.Join(dir, ownerFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_RDWR|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*os.File, error) {
		f.Close()
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fail(err)
	}
	if _, err := f.WriteString(id); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, ownerFile)); err != nil {
		return fail(err)
	}
	return f, nil
}

// collectStale removes what runs killed before their own clean-up left:
// for each bundle folder in tmp whose owner file belongs to us and is not
// locked, it force-deletes the container it names and removes the folder.
// Folders without an owner file, or of other users, are left alone.
// Errors are ignored: this is housekeeping, the run goes on.
func collectStale(ctx context.Context, rt runtime.Runtime, tmp string) {
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), bundlePrefix) {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		id, ok := staleOwner(dir)
		if !ok {
			continue
		}
		if id != "" {
			_ = rt.Delete(ctx, id, true)
		}
		_ = os.RemoveAll(dir)
	}
}

// staleOwner reports whether dir is a bundle folder of ours whose run is
// gone, and the container ID it recorded.
func staleOwner(dir string) (string, bool) {
	f, err := os.OpenFile(filepath.Join(dir, ownerFile), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
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
