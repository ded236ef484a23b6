// Package consolesocket is the receiving end of an OCI runtime's
// --console-socket: a unix socket on which the runtime sends the pty master
// of a terminal container as one SCM_RIGHTS file descriptor, the way
// containerd's shim and conmon receive it.
package consolesocket

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Listener listens on a unix socket for one runtime connection carrying a
// pty master.
type Listener struct {
	// Path is the socket path to pass as --console-socket.
	Path string
	ln   *net.UnixListener
}

// Listen creates the socket at path. The socket is made connectable by any
// user (mode 0777) so that rootless runtimes started as another user can
// reach it; the directory holding it must be traversable for them.
func Listen(path string) (*Listener, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on console socket %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o777); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod console socket %s: %w", path, err)
	}
	return &Listener{Path: path, ln: ln}, nil
}

// Close closes the listener and removes the socket.
func (l *Listener) Close() error { return l.ln.Close() }

// Receive waits up to timeout for one connection and returns the pty master
// it carries. name is the payload sent with the descriptor (runc sends the
// pty's name). Exactly one descriptor is expected; anything else is an error
// and every received descriptor is closed.
func (l *Listener) Receive(timeout time.Duration) (master *os.File, name string, err error) {
	if err := l.ln.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, "", err
	}
	conn, err := l.ln.AcceptUnix()
	if err != nil {
		return nil, "", fmt.Errorf("accept on console socket %s: %w", l.Path, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, "", err
	}
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4*8))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, "", fmt.Errorf("recvmsg on console socket: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, "", fmt.Errorf("parse control message: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		fds = append(fds, got...)
	}
	if len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, "", fmt.Errorf("console socket: got %d file descriptors (payload %q), want exactly 1", len(fds), buf[:n])
	}
	name = string(buf[:n])
	f := os.NewFile(uintptr(fds[0]), "pty-master:"+name)
	if f == nil {
		return nil, "", errors.New("console socket: invalid descriptor")
	}
	return f, name, nil
}
