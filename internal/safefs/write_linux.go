//go:build linux

package safefs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// beneath resolves below a directory descriptor without following any
// symlink, not even one planted by someone who shares the tree.
var beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openDirBeneath opens the folder rel of dirfd (made, with its parents,
// owned by owner when mkdir is set) for *at calls.
func openDirBeneath(dirfd int, rel string, mkdir bool, perm fs.FileMode, owner [2]int) (int, error) {
	fd, err := unix.Dup(dirfd)
	if err != nil {
		return -1, err
	}
	if rel == "." || rel == "" {
		return fd, nil
	}
	for _, part := range strings.Split(rel, "/") {
		how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: uint64(beneath)}
		next, err := unix.Openat2(fd, part, how)
		if errors.Is(err, unix.ENOENT) && mkdir {
			if err = unix.Mkdirat(fd, part, uint32(perm.Perm())); err == nil || errors.Is(err, unix.EEXIST) {
				if owner[0] >= 0 {
					_ = unix.Fchownat(fd, part, owner[0], owner[1], unix.AT_SYMLINK_NOFOLLOW)
				}
				next, err = unix.Openat2(fd, part, how)
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// WriteBeneath writes data to rel inside root, atomically (a temporary
// file in the same folder, renamed over rel), making missing parent
// folders. Nothing on the way is followed if it is a symlink, and rel
// must be local (no "..", not absolute): a tree someone else writes to
// (a sandbox's workspace) cannot redirect the write to a host file. The
// file and folders made get perm (0755 for folders) and, when owner[0] is
// not -1, that owner.
func WriteBeneath(root, rel string, data []byte, perm fs.FileMode, owner [2]int) error {
	if !filepath.IsLocal(rel) || strings.ContainsRune(rel, 0) {
		return fmt.Errorf("%q: not a path inside the folder", rel)
	}
	rel = filepath.ToSlash(filepath.Clean(rel))
	rootfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(rootfd)
	dir, base := filepath.Split(rel)
	dirfd, err := openDirBeneath(rootfd, strings.TrimSuffix(dir, "/"), true, 0o755, owner)
	if err != nil {
		return &os.PathError{Op: "open", Path: filepath.Join(root, dir), Err: err}
	}
	defer unix.Close(dirfd)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := ".skillrun-" + hex.EncodeToString(rnd[:]) + ".tmp"
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, uint32(perm.Perm()))
	if err != nil {
		return &os.PathError{Op: "create", Path: filepath.Join(root, rel), Err: err}
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm.Perm())
	}
	if err == nil && owner[0] >= 0 {
		err = f.Chown(owner[0], owner[1])
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// renameat replaces a symlink planted at rel, never its target.
		err = unix.Renameat(dirfd, tmp, dirfd, base)
	}
	if err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return &os.PathError{Op: "write", Path: filepath.Join(root, rel), Err: err}
	}
	return nil
}
