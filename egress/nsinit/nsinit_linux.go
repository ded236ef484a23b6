//go:build linux

package nsinit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// handoffFD returns the descriptor the runtime passed to the init for the
// handoff, -1 when there is none. The runtime passes it as the last of
// the process's extra files, which libcontainer places just before its
// own descriptors (the console socket when there is one, then the init
// pipe), whose numbers it gives the init in the environment. A descriptor
// there that is not a unix stream socket connected to an egress server's
// handoff socket (one a caller preserved with --preserve-fds) is left
// alone.
func handoffFD() int {
	first := -1
	for _, env := range []string{"_LIBCONTAINER_CONSOLE", "_LIBCONTAINER_INITPIPE"} {
		if n, err := strconv.Atoi(os.Getenv(env)); err == nil {
			first = n
			break
		}
	}
	fd := first - 1
	if fd < 3 {
		return -1
	}
	if d, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN); err != nil || d != unix.AF_UNIX {
		return -1
	}
	if t, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || t != unix.SOCK_STREAM {
		return -1
	}
	sa, err := unix.Getpeername(fd)
	if err != nil {
		return -1
	}
	if ua, ok := sa.(*unix.SockaddrUnix); !ok || filepath.Base(ua.Name) != SocketName {
		return -1
	}
	return fd
}

// FromInit does the sandbox's side of the handoff when the runtime passed
// a handoff socket to this process, the container's init, before
// libcontainer's init runs (it must be in the container's namespaces, as
// their root). The descriptor is replaced with /dev/null, close-on-exec:
// nothing of it reaches the container's process. An error means the
// sandbox must not run: the caller exits.
func FromInit() error {
	fd := handoffFD()
	if fd < 0 {
		return nil
	}
	defer func() {
		if null, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			_ = unix.Dup3(null, fd, unix.O_CLOEXEC)
			unix.Close(null)
		} else {
			unix.Close(fd)
		}
	}()
	return Give(fd)
}

// Give binds the sandbox's sockets in the current network namespace as
// the egress server on the connected unix socket fd asks, and sends them
// with a pidfd of this process. The copies here are closed when it
// returns: from then on the server holds the only ones.
func Give(fd int) error {
	tv := unix.NsecToTimeval(Timeout.Nanoseconds())
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	line, err := readLine(fd)
	if err != nil {
		return fmt.Errorf("egress: read request: %w", err)
	}
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return fmt.Errorf("egress: request: %w", err)
	}
	fds, r, err := bindAll(req.Ports)
	defer func() {
		for _, f := range fds {
			unix.Close(f)
		}
	}()
	if err != nil {
		msg, _ := json.Marshal(Reply{Error: err.Error()})
		_ = unix.Sendmsg(fd, msg, nil, nil, 0)
		return err
	}
	msg, _ := json.Marshal(r)
	if err := sendmsg(fd, msg, unix.UnixRights(fds...)); err != nil {
		return fmt.Errorf("egress: send sockets: %w", err)
	}
	ack, err := readLine(fd)
	if err != nil || string(ack) != "ok" {
		return fmt.Errorf("egress: the server did not take the sockets: %v", err)
	}
	return nil
}

// bindAll sets lo up and binds the DNS socket and one listener per port
// (plus the DNS's and the proxy's), then opens a pidfd of this process.
func bindAll(ports []int) (fds []int, r Reply, err error) {
	if err := setupLo(); err != nil {
		return nil, r, fmt.Errorf("egress: lo: %w", err)
	}
	udp, err := bindSocket(unix.SOCK_DGRAM, [4]byte{127, 0, 0, 1}, DNSPort)
	if err != nil {
		return nil, r, fmt.Errorf("egress: DNS socket: %w", err)
	}
	fds = append(fds, udp)
	r.TCP = WantPorts(ports)
	for _, p := range r.TCP {
		fd, err := bindSocket(unix.SOCK_STREAM, listenAddr(p, ports), p)
		if err != nil {
			return fds, r, fmt.Errorf("egress: listen on port %d: %w", p, err)
		}
		fds = append(fds, fd)
	}
	if pidfd, err := unix.PidfdOpen(unix.Getpid(), 0); err == nil {
		fds = append(fds, pidfd)
		r.Pidfd = true
	}
	return fds, r, nil
}

func sendmsg(fd int, msg, oob []byte) error {
	for {
		err := unix.Sendmsg(fd, msg, oob, nil, 0)
		if err != unix.EINTR {
			return err
		}
	}
}

// readLine reads one line (without its newline) byte by byte: nothing
// past it is consumed.
func readLine(fd int) ([]byte, error) {
	var line bytes.Buffer
	var b [1]byte
	deadline := time.Now().Add(Timeout)
	for line.Len() < 64<<10 {
		n, err := unix.Read(fd, b[:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			// A non-blocking descriptor: wait for it (SO_RCVTIMEO
			// bounds blocking reads only).
			left := time.Until(deadline)
			if left <= 0 {
				return nil, os.ErrDeadlineExceeded
			}
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			_, _ = unix.Poll(pfd, int(left.Milliseconds())+1)
			continue
		case err != nil:
			return nil, err
		case n == 0:
			return nil, errors.New("unexpected end of the handoff")
		}
		if b[0] == '\n' {
			return line.Bytes(), nil
		}
		line.WriteByte(b[0])
	}
	return nil, errors.New("handoff line too long")
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
	ip := SyntheticLo.As4()
	return netlink.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(ip[:]), Mask: net.CIDRMask(SyntheticPrefix.Bits(), 32)}})
}

// listenAddr is where the TCP listener of port p is bound: 0.0.0.0 for an
// allowed port (connections to every synthetic address), 127.0.0.1 for
// the DNS's and the proxy's own ports when no rule uses them, so that
// the sandbox keeps those ports on its other addresses (OpenShell's
// supervisor runs its proxy on 10.200.0.1:3128).
func listenAddr(p int, allowed []int) [4]byte {
	if (p == DNSPort || p == ProxyPort) && !slices.Contains(allowed, p) {
		return [4]byte{127, 0, 0, 1}
	}
	return [4]byte{}
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
