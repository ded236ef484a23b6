//go:build linux

package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// HookArg is the first argument of `BINARY HookArg SOCKET`, the hook the
// Linux back end runs as a createContainer hook (inside the container's
// namespaces, before its pivot_root and before any of its code runs)
// when a container is created with an egress socket.
const HookArg = "__skillrun-egress-hook"

// handoffTimeout bounds each side's wait for the other.
const handoffTimeout = 10 * time.Second

// request is what the host side asks the hook for.
type request struct {
	Ports []int `json:"ports"`
}

// reply describes the descriptors the hook sends, in order: the DNS's UDP
// socket, one TCP listener per port of TCP, then a pidfd of the init.
type reply struct {
	TCP   []int `json:"tcp"`
	Pidfd bool  `json:"pidfd"`
}

// Handoff is the host end of the unix socket the hook hands the
// sandbox's sockets over.
type Handoff struct {
	l    *net.UnixListener
	path string
}

// Listen makes the unix socket at path (which must not exist) for one
// hook to connect to. uid and gid, when not -1, own it: the hook runs as
// the container's root, which is that host user.
func Listen(path string, uid, gid int) (*Handoff, error) {
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
	return &Handoff{l: l, path: path}, nil
}

// Path is the socket's path (the hook's argument).
func (h *Handoff) Path() string { return h.path }

// Close removes the socket.
func (h *Handoff) Close() error { return h.l.Close() }

// Accept waits for the hook (until ctx ends), asks it for listeners on
// ports (plus DNS and the proxy) and returns what it sent. The socket is
// closed and removed either way.
func (h *Handoff) Accept(ctx context.Context, ports []int) (*Sockets, error) {
	stop := context.AfterFunc(ctx, func() { h.l.Close() })
	defer stop()
	defer h.l.Close()
	c, err := h.l.AcceptUnix()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("egress: no hook connected: %w", context.Cause(ctx))
		}
		return nil, fmt.Errorf("egress: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(handoffTimeout))
	req, _ := json.Marshal(request{Ports: ports})
	if _, err := c.Write(append(req, '\n')); err != nil {
		return nil, fmt.Errorf("egress: hook: %w", err)
	}
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4*(len(ports)+8)))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("egress: hook: %w", err)
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
	if _, err := c.Write([]byte("ok\n")); err != nil {
		socks.Close()
		return nil, fmt.Errorf("egress: hook: %w", err)
	}
	return socks, nil
}

// sockets checks the hook's reply and descriptors and wraps them. Every
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
	var r reply
	if err := json.Unmarshal(msg, &r); err != nil {
		return nil, fmt.Errorf("egress: hook reply: %w", err)
	}
	want := 1 + len(r.TCP)
	if r.Pidfd {
		want++
	}
	if len(fds) != want || !sameSet(r.TCP, wantPorts(ports)) {
		return nil, fmt.Errorf("egress: hook sent %d descriptors for ports %v, want %d for %v", len(fds), r.TCP, want, wantPorts(ports))
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

// wantPorts is ports plus the DNS's and the proxy's, sorted, distinct.
func wantPorts(ports []int) []int {
	seen := map[int]bool{DNSPort: true, ProxyPort: true}
	out := []int{DNSPort, ProxyPort}
	for _, p := range ports {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Ints(out)
	return out
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

// HookMain is the hook's body (args: SOCKET). Run inside the container's
// network namespace as its root, it gives lo the synthetic range, binds
// the DNS socket (127.0.0.1:53 UDP) and a TCP listener on 0.0.0.0 per
// port the host side asks for, and sends them with a pidfd of the
// container's init over SOCKET. Its own copies close when it exits: from
// then on the host side holds the only ones.
func HookMain(args []string) error {
	if len(args) != 1 {
		return errors.New("egress hook: usage: SOCKET")
	}
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: args[0], Net: "unix"})
	if err != nil {
		return fmt.Errorf("egress hook: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(handoffTimeout))
	br := bufio.NewReader(c)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("egress hook: read request: %w", err)
	}
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return fmt.Errorf("egress hook: request: %w", err)
	}
	if err := setupLo(); err != nil {
		return fmt.Errorf("egress hook: lo: %w", err)
	}
	ports := wantPorts(req.Ports)
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	udp, err := bindSocket(unix.SOCK_DGRAM, [4]byte{127, 0, 0, 1}, DNSPort)
	if err != nil {
		return fmt.Errorf("egress hook: DNS socket: %w", err)
	}
	fds = append(fds, udp)
	for _, p := range ports {
		fd, err := bindSocket(unix.SOCK_STREAM, [4]byte{}, p)
		if err != nil {
			return fmt.Errorf("egress hook: listen on port %d: %w", p, err)
		}
		fds = append(fds, fd)
	}
	r := reply{TCP: ports}
	// The hook's parent is the container's init (PID 1 of its namespace).
	if pidfd, err := unix.PidfdOpen(os.Getppid(), 0); err == nil {
		fds = append(fds, pidfd)
		r.Pidfd = true
	}
	msg, _ := json.Marshal(r)
	if _, _, err := c.WriteMsgUnix(msg, unix.UnixRights(fds...), nil); err != nil {
		return fmt.Errorf("egress hook: send sockets: %w", err)
	}
	if ack, err := br.ReadString('\n'); err != nil || ack != "ok\n" {
		return fmt.Errorf("egress hook: the host side did not take the sockets: %v", err)
	}
	return nil
}

// setupLo brings lo up and assigns it the synthetic range.
func setupLo() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return err
	}
	ip := syntheticLo.As4()
	bits := SyntheticPrefix.Bits()
	return netlink.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(ip[:]), Mask: net.CIDRMask(bits, 32)}})
}

// bindSocket makes an IPv4 socket bound to ip:port (listening, for TCP).
// No SO_REUSEPORT: nothing in the sandbox can bind the same port.
func bindSocket(typ int, ip [4]byte, port int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: ip}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if typ == unix.SOCK_STREAM {
		if err := unix.Listen(fd, 4096); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}
