//go:build linux

package handoff

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/egress/nsinit"
)

// Listen makes the unix socket at path (which must not exist, and whose
// name must be nsinit.SocketName) for one runtime to connect to, 0600.
// uid and gid, when not -1, own it. The listener unlinks it when closed.
func Listen(path string, uid, gid int) (*net.UnixListener, error) {
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	l.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err == nil && uid >= 0 {
		err = os.Lchown(path, uid, gid)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("egress: %w", err)
		}
	}
	return l, nil
}

// ListenPrivate makes the handoff socket in a new private folder (short
// path, 0700) that uid and gid (when not -1: the host IDs of the
// container's root) own, and returns the listener's file for a helper to
// inherit, and a function that removes both.
func ListenPrivate(uid, gid int) (path string, file *os.File, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "skillrun-egress-")
	if err != nil {
		return "", nil, nil, fmt.Errorf("egress: %w", err)
	}
	cleanup = func() { os.RemoveAll(dir) }
	if uid >= 0 {
		if err := os.Lchown(dir, uid, gid); err != nil {
			cleanup()
			return "", nil, nil, fmt.Errorf("egress: %w", err)
		}
	}
	path = filepath.Join(dir, nsinit.SocketName)
	l, err := Listen(path, uid, gid)
	if err != nil {
		cleanup()
		return "", nil, nil, err
	}
	// The helper owns the socket from now on: the file is a dup, and the
	// listener here must not unlink it when it is closed.
	l.SetUnlinkOnClose(false)
	file, err = l.File()
	l.Close()
	if err != nil {
		cleanup()
		return "", nil, nil, fmt.Errorf("egress: %w", err)
	}
	return path, file, cleanup, nil
}

// Dial connects to the handoff socket at path and returns the connection
// as a blocking descriptor, for the runtime to pass to the container's
// init (the last of its extra files; see nsinit.FromInit).
func Dial(path string) (*os.File, error) {
	if filepath.Base(path) != nsinit.SocketName {
		return nil, fmt.Errorf("egress: handoff socket %q: want a socket named %s", path, nsinit.SocketName)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	for {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("egress: connect to %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), "egress-handoff"), nil
}
