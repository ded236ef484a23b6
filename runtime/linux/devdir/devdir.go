//go:build linux

package devdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// HostDir is where skillrun keeps the sandbox's /dev: the device nodes
// the OCI runtime spec requires and the links a Linux userland expects,
// made once per host by root. /dev/pts and /dev/shm are still the
// sandbox's own mounts, on the two mount points it holds. The folder must
// be on a filesystem mounted without nodev.
const HostDir = "/var/lib/skillrun/dev"

// entry is one entry of the device folder: a character device (major,
// minor, mode 0666), a directory (mount point, 0755) or a symbolic link.
type entry struct {
	name         string
	mode         fs.FileMode // type bits: fs.ModeCharDevice|fs.ModeDevice, fs.ModeDir or fs.ModeSymlink
	major, minor uint32
	target       string
}

// entries is the whole folder, nothing more: the devices of the OCI
// runtime spec's default set (runtime-spec config-linux.md, "Default
// Devices"; /dev/ptmx as the link to the sandbox's devpts instance), the
// mount points of the sandbox's /dev/pts and /dev/shm, and the /dev/fd and
// standard-stream links runc makes.
var entries = []entry{
	{name: "null", mode: fs.ModeDevice | fs.ModeCharDevice, major: 1, minor: 3},
	{name: "zero", mode: fs.ModeDevice | fs.ModeCharDevice, major: 1, minor: 5},
	{name: "full", mode: fs.ModeDevice | fs.ModeCharDevice, major: 1, minor: 7},
	{name: "random", mode: fs.ModeDevice | fs.ModeCharDevice, major: 1, minor: 8},
	{name: "urandom", mode: fs.ModeDevice | fs.ModeCharDevice, major: 1, minor: 9},
	{name: "tty", mode: fs.ModeDevice | fs.ModeCharDevice, major: 5, minor: 0},
	{name: "pts", mode: fs.ModeDir},
	{name: "shm", mode: fs.ModeDir},
	{name: "ptmx", mode: fs.ModeSymlink, target: "pts/ptmx"},
	{name: "fd", mode: fs.ModeSymlink, target: "/proc/self/fd"},
	{name: "stdin", mode: fs.ModeSymlink, target: "/proc/self/fd/0"},
	{name: "stdout", mode: fs.ModeSymlink, target: "/proc/self/fd/1"},
	{name: "stderr", mode: fs.ModeSymlink, target: "/proc/self/fd/2"},
}

func statOwner(fi fs.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

// Check reports whether dir is a device folder a sandbox's /dev can
// be bound to: exactly the entries of entries with their types,
// devices, modes and targets, owned by root and not writable by anyone
// else (the folder and its parent), on a filesystem mounted without nodev.
func Check(dir string) error {
	if err := checkOwner(dir); err != nil {
		return err
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		return fmt.Errorf("device folder: statfs %s: %w", dir, err)
	}
	if sfs.Flags&unix.ST_NODEV != 0 {
		return fmt.Errorf("device folder: %s is on a filesystem mounted nodev", dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("device folder: %w", err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("device folder: %w", err)
	}
	for _, e := range entries {
		if err := checkEntry(int(f.Fd()), dir, e); err != nil {
			return err
		}
	}
	if len(names) != len(entries) {
		for _, n := range names {
			if !slices.ContainsFunc(entries, func(e entry) bool { return e.name == n }) {
				return fmt.Errorf("device folder: %s is not one of its entries", filepath.Join(dir, n))
			}
		}
	}
	return nil
}

func checkEntry(dirfd int, dir string, e entry) error {
	var st unix.Stat_t
	p := filepath.Join(dir, e.name)
	if err := unix.Fstatat(dirfd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("device folder: %s: %w", p, err)
	}
	if st.Uid != 0 || st.Gid != 0 {
		return fmt.Errorf("device folder: %s is not owned by root", p)
	}
	typ, perm := st.Mode&unix.S_IFMT, st.Mode&0o7777
	switch {
	case e.mode&fs.ModeCharDevice != 0:
		if typ != unix.S_IFCHR || perm != 0o666 || unix.Major(st.Rdev) != e.major || unix.Minor(st.Rdev) != e.minor {
			return fmt.Errorf("device folder: %s is not character device %d:%d mode 0666", p, e.major, e.minor)
		}
	case e.mode&fs.ModeDir != 0:
		if typ != unix.S_IFDIR || perm != 0o755 {
			return fmt.Errorf("device folder: %s is not a directory of mode 0755", p)
		}
	default:
		if typ != unix.S_IFLNK {
			return fmt.Errorf("device folder: %s is not a symbolic link", p)
		}
		buf := make([]byte, len(e.target)+1)
		n, err := unix.Readlinkat(dirfd, e.name, buf)
		if err != nil || n != len(e.target) || string(buf[:n]) != e.target {
			return fmt.Errorf("device folder: %s does not point to %s", p, e.target)
		}
	}
	return nil
}

// Ensure returns nil when dir is a usable device folder
// (Check), making it first when it is missing or wrong and this
// process is root: built beside it under a temporary name, then renamed
// into place, so that a sandbox never sees a half-made one and concurrent
// callers agree on one folder. The parent, the folder's own (made if
// missing), is set to 0755.
func Ensure(dir string) error {
	err := Check(dir)
	if err == nil || os.Geteuid() != 0 {
		return err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("device folder: %w", err)
	}
	// skillrun's own folder: 0755 whatever the umask was when it was made.
	if err := os.Chmod(parent, 0o755); err != nil {
		return fmt.Errorf("device folder: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, ".dev-")
	if err != nil {
		return fmt.Errorf("device folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("device folder: %w", err)
	}
	for _, e := range entries {
		p := filepath.Join(tmp, e.name)
		switch {
		case e.mode&fs.ModeCharDevice != 0:
			err = unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(e.major, e.minor)))
			if err == nil {
				err = os.Chmod(p, 0o666) // past the umask
			}
		case e.mode&fs.ModeDir != 0:
			err = os.Mkdir(p, 0o755)
			if err == nil {
				err = os.Chmod(p, 0o755)
			}
		default:
			err = os.Symlink(e.target, p)
		}
		if err != nil {
			return fmt.Errorf("device folder: %w", err)
		}
	}
	if Check(dir) != nil {
		// A wrong folder in the way (not a half-made one: those are only
		// ever under temporary names): moved aside, then removed.
		if _, lerr := os.Lstat(dir); lerr == nil {
			old, err := os.MkdirTemp(parent, ".dev-old-")
			if err != nil {
				return fmt.Errorf("device folder: %w", err)
			}
			defer os.RemoveAll(old)
			if err := os.Rename(dir, filepath.Join(old, "dev")); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("device folder: move aside %s: %w", dir, err)
			}
		}
		// Losing a race to a concurrent caller leaves theirs in place.
		_ = os.Rename(tmp, dir)
	}
	return Check(dir)
}

// checkOwner fails unless dir and its parent are directories owned
// by root that nobody else may write to (nobody else can swap or change
// what a sandbox's /dev will be) and that any user may traverse (a
// rootless sandbox binds it too); dir itself is mode 0755.
func checkOwner(dir string) error {
	for _, p := range []string{filepath.Dir(dir), dir} {
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("device folder: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("device folder: %s is not a directory", p)
		}
		if uid, ok := statOwner(fi); !ok || uid != 0 {
			return fmt.Errorf("device folder: %s is not owned by root", p)
		}
		perm := fi.Mode().Perm()
		if perm&0o022 != 0 {
			return fmt.Errorf("device folder: %s is writable by group or others (mode %v)", p, perm)
		}
		if perm&0o001 == 0 || (p == dir && perm != 0o755) {
			return fmt.Errorf("device folder: %s is not mode 0755 (mode %v)", p, perm)
		}
	}
	return nil
}
