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
	"time"

	"golang.org/x/sys/unix"
)

// Listen binds a private Unix socket at path the way OpenShell's gateway
// expects of an out-of-process driver, and a little stricter: no ancestor
// of the socket may be a symlink or a directory others can write to
// without the sticky bit (either would let another user swap the
// directory after it was checked); the parent directory is created if
// missing and must be a real directory owned by the caller's effective
// UID, and is made 0700; an existing socket there is removed only when it
// is a socket owned by the caller that nobody listens on (a connect is
// refused): a live socket (another driver) and anything else are refused;
// the new socket is made 0600. The listener accepts only peers whose
// SO_PEERCRED UID is the caller's: other connections are closed before a
// byte is read.
func Listen(path string) (net.Listener, error) {
	if path == "" {
		return nil, errors.New("socket path is empty")
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("socket path: %w", err)
	}
	parent := filepath.Dir(path)
	uid := os.Geteuid()
	if err := checkAncestors(parent); err != nil {
		return nil, err
	}
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
		// Stale, or served by a live process (another driver)?
		c, err := net.DialTimeout("unix", path, time.Second)
		switch {
		case err == nil:
			c.Close()
			return nil, fmt.Errorf("socket %s is in use: a running process accepts connections on it (another driver?); stop it or choose another --socket", path)
		case !errors.Is(err, syscall.ECONNREFUSED):
			return nil, fmt.Errorf("socket %s exists and could not be probed (%v): not removing it", path, err)
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

// checkAncestors refuses a socket directory with a symlink among dir and
// its existing ancestors, or an existing ancestor that users other than
// its owner may write to without the sticky bit (they could rename the
// directories below it). dir itself may be missing (Listen creates it).
func checkAncestors(dir string) error {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fmt.Errorf("socket directory: stat %s: %w", p, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			real, _ := filepath.EvalSymlinks(p)
			return fmt.Errorf("socket directory: %s must be a directory, not a symlink (it points to %s): give a path without symlinks", p, real)
		case !fi.IsDir():
			return fmt.Errorf("socket directory: %s is not a directory", p)
		case fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0:
			return fmt.Errorf("socket directory: %s is writable by group or others (mode %o) without the sticky bit", p, fi.Mode().Perm())
		}
		if p == "/" || p == "." {
			return nil
		}
	}
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
