//go:build linux

package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/egress/handoff"
	"github.com/skillrun/skillrun/egress/nsinit"
)

// handoffTimeout bounds each side's wait for the other.
const handoffTimeout = nsinit.Timeout

// Handoff is the egress server's end of the unix socket the sandbox's
// sockets are handed over: the runtime connects to it and passes the
// connection to the container's init, which binds them inside the
// container's namespaces and sends them (package nsinit).
type Handoff struct {
	l    *net.UnixListener
	path string
	// beforeAck, when set, is called with the sandbox's sockets before
	// the init is told they were received: the init goes on only after it
	// returns nil.
	beforeAck func(*Sockets) error
}

// Listen makes the unix socket at path (which must not exist, and whose
// name must be nsinit.SocketName) for one runtime to connect to. uid and
// gid, when not -1, own it.
func Listen(path string, uid, gid int) (*Handoff, error) {
	l, err := handoff.Listen(path, uid, gid)
	if err != nil {
		return nil, err
	}
	return &Handoff{l: l, path: path}, nil
}

// Path is the socket's path (for DialHandoff).
func (h *Handoff) Path() string { return h.path }

// Close removes the socket.
func (h *Handoff) Close() error { return h.l.Close() }

// Accept waits for the runtime's connection (until ctx ends), asks the
// container's init on it for listeners on ports (plus DNS and the proxy)
// and returns what it sent. The socket is
// closed and removed either way.
func (h *Handoff) Accept(ctx context.Context, ports []int) (*Sockets, error) {
	stop := context.AfterFunc(ctx, func() { h.l.Close() })
	defer stop()
	defer h.l.Close()
	c, err := h.l.AcceptUnix()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("egress: no sandbox connected: %w", context.Cause(ctx))
		}
		return nil, fmt.Errorf("egress: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(handoffTimeout))
	req, _ := json.Marshal(nsinit.Request{Ports: ports})
	if _, err := c.Write(append(req, '\n')); err != nil {
		return nil, fmt.Errorf("egress: sandbox: %w", err)
	}
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4*(len(ports)+8)))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("egress: sandbox: %w", err)
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if r, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, r...)
			}
		}
	}
	socks, err := sockets(buf[:n], fds, ports)
	if err != nil {
		return nil, err
	}
	if h.beforeAck != nil {
		if err := h.beforeAck(socks); err != nil {
			socks.Close()
			return nil, err
		}
	}
	if _, err := c.Write([]byte("ok\n")); err != nil {
		socks.Close()
		return nil, fmt.Errorf("egress: sandbox: %w", err)
	}
	return socks, nil
}

// sockets checks the init's reply and descriptors and wraps them. Every
// descriptor is closed on error.
func sockets(msg []byte, fds []int, ports []int) (_ *Sockets, err error) {
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "egress")
	}
	defer func() {
		for _, f := range files {
			f.Close() // net.File* dup them
		}
	}()
	var r nsinit.Reply
	if err := json.Unmarshal(msg, &r); err != nil {
		return nil, fmt.Errorf("egress: sandbox reply: %w", err)
	}
	if r.Error != "" {
		return nil, fmt.Errorf("egress: sandbox: %s", r.Error)
	}
	want := 1 + len(r.TCP)
	if r.Pidfd {
		want++
	}
	if len(fds) != want || !sameSet(r.TCP, nsinit.WantPorts(ports)) {
		return nil, fmt.Errorf("egress: sandbox sent %d descriptors for ports %v, want %d for %v", len(fds), r.TCP, want, nsinit.WantPorts(ports))
	}
	s := &Sockets{TCP: map[int]*net.TCPListener{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	pc, err := net.FilePacketConn(files[0])
	if err != nil {
		return nil, fmt.Errorf("egress: DNS socket: %w", err)
	}
	var ok bool
	if s.DNS, ok = pc.(*net.UDPConn); !ok {
		pc.Close()
		return nil, errors.New("egress: DNS socket is not UDP")
	}
	for i, p := range r.TCP {
		l, err := net.FileListener(files[1+i])
		if err != nil {
			return nil, fmt.Errorf("egress: listener %d: %w", p, err)
		}
		tl, ok := l.(*net.TCPListener)
		if !ok || tl.Addr().(*net.TCPAddr).Port != p {
			l.Close()
			return nil, fmt.Errorf("egress: listener %d is not a TCP listener on that port", p)
		}
		s.TCP[p] = tl
	}
	if r.Pidfd {
		s.Init, files[want-1] = files[want-1], nil
	}
	return s, nil
}

func sameSet(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	a = append([]int(nil), a...)
	sort.Ints(a)
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
