//go:build linux

package openshell

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Listen binds a private Unix socket at path the way OpenShell's gateway
// expects of an out-of-process driver: the parent directory is created if
// missing and must be a real directory (not a symlink) owned by the
// caller's effective UID, and is made 0700; an existing socket there is
// removed only when it is a socket owned by the caller (anything else is
// refused); the new socket is made 0600. The listener accepts only peers
// whose SO_PEERCRED UID is the caller's: other connections are closed
// before a byte is read.
func Listen(path string) (net.Listener, error) {
	if path == "" {
		return nil, errors.New("socket path is empty")
	}
	path = filepath.Clean(path)
	parent := filepath.Dir(path)
	uid := os.Geteuid()
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, fmt.Errorf("create socket directory %s: %w", parent, err)
	}
	fi, err := os.Lstat(parent)
	if err != nil {
		return nil, fmt.Errorf("stat socket directory %s: %w", parent, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir() {
		return nil, fmt.Errorf("socket directory %s must be a directory, not a symlink", parent)
	}
	if owner := int(fi.Sys().(*syscall.Stat_t).Uid); owner != uid {
		return nil, fmt.Errorf("socket directory %s is owned by uid %d, expected %d", parent, owner, uid)
	}
	if err := os.Chmod(parent, 0o700); err != nil {
		return nil, fmt.Errorf("chmod socket directory %s: %w", parent, err)
	}
	switch fi, err := os.Lstat(path); {
	case err == nil:
		if fi.Mode()&fs.ModeSocket == 0 || int(fi.Sys().(*syscall.Stat_t).Uid) != uid {
			return nil, fmt.Errorf("socket path %s exists and is not a Unix socket owned by uid %d", path, uid)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("stat socket %s: %w", path, err)
	}
	// The directory is 0700, so nobody else can reach the socket in the
	// moment between bind and chmod.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("bind socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod socket %s: %w", path, err)
	}
	return &sameUIDListener{UnixListener: l, uid: uint32(uid)}, nil
}

// sameUIDListener drops connections from other users.
type sameUIDListener struct {
	*net.UnixListener
	uid uint32
}

// Accept returns the next connection whose peer has the listener's UID.
func (l *sameUIDListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		if ok, _ := peerUID(c, l.uid); ok {
			return c, nil
		}
		c.Close()
	}
}

// peerUID reports whether the peer of c runs as uid.
func peerUID(c *net.UnixConn, uid uint32) (bool, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return false, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return false, err
	}
	if cerr != nil {
		return false, cerr
	}
	return cred.Uid == uid, nil
}
