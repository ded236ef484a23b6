package safefs

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// OpenBeneath opens rel inside root for reading without following any
// symlink on the way (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS): a
// tree that someone else may change while skillrun, possibly as root,
// reads or seals it cannot redirect it to a host file. Kernels without
// openat2 (before 5.6) get O_NOFOLLOW on the last component only.
func OpenBeneath(root, rel string) (*os.File, error) {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(dir)
	how := &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := unix.Openat2(dir, rel, how)
	if errors.Is(err, unix.ENOSYS) {
		fd, err = unix.Openat(dir, rel, int(how.Flags), 0)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(root, rel), Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(root, rel)), nil
}
