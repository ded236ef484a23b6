//go:build linux

package linux

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"github.com/containerd/console"
	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/runtime"
)

// procIO owns what the runtime set up for a process' standard I/O: a
// console socket to close once the process started, and for a foreground
// terminal the pty master copy loops and the host console to restore.
type procIO struct {
	postStart []io.Closer
	consoleC  chan error
	console   console.Console
	host      console.Console
	wg        sync.WaitGroup
	// out counts the copies of the program's output trackOutput started.
	out sync.WaitGroup
}

// setupIO wires stdio for p: the caller's files or streams, a console
// socket the caller listens on, or (foreground with a terminal) a pty the
// runtime itself relays to the caller's terminal.
func setupIO(p *libcontainer.Process, terminal, detach bool, socketPath string, stdio runtime.Stdio) (*procIO, error) {
	if detach && terminal && socketPath == "" {
		return nil, errors.New("cannot allocate tty if runc will detach without setting console socket")
	}
	if (!detach || !terminal) && socketPath != "" {
		return nil, errors.New("cannot use console socket if runc will not detach or allocate tty")
	}
	pio := &procIO{}
	if !terminal {
		p.Stdin, p.Stdout, p.Stderr = stdio.Stdin, stdio.Stdout, stdio.Stderr
		return pio, nil
	}
	if detach {
		conn, err := net.Dial("unix", socketPath)
		if err != nil {
			return nil, fmt.Errorf("console socket %s: %w", socketPath, err)
		}
		f, err := conn.(*net.UnixConn).File()
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("console socket %s: %w", socketPath, err)
		}
		p.ConsoleSocket = f
		pio.postStart = append(pio.postStart, conn, f)
		return pio, nil
	}
	// Foreground terminal: receive the pty master ourselves and relay it.
	host, err := hostConsole(stdio)
	if err != nil {
		return nil, err
	}
	pio.host = host
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("console socketpair: %w", err)
	}
	parent, child := os.NewFile(uintptr(fds[0]), "console-parent"), os.NewFile(uintptr(fds[1]), "console-child")
	p.ConsoleSocket = child
	pio.postStart = append(pio.postStart, parent, child)
	pio.consoleC = make(chan error, 1)
	go func() { pio.consoleC <- pio.relay(parent, stdio) }()
	return pio, nil
}

// trackOutput makes p's stdout and stderr, when they are streams rather
// than files, pipes this process copies itself (instead of os/exec, whose
// copies only Wait waits for): waitOutput then says when the program's
// output has all been written, while the process may not be reaped yet.
// Our write ends go once the process has started (postStart).
func (pio *procIO) trackOutput(p *libcontainer.Process) error {
	for _, w := range []*io.Writer{&p.Stdout, &p.Stderr} {
		if *w == nil {
			continue
		}
		if _, ok := (*w).(*os.File); ok {
			continue
		}
		r, pw, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("output pipe: %w", err)
		}
		dst := *w
		*w = pw
		pio.postStart = append(pio.postStart, pw)
		pio.wg.Add(1)
		pio.out.Add(1)
		go func() {
			defer pio.wg.Done()
			defer pio.out.Done()
			_, _ = io.Copy(dst, r)
			r.Close()
		}()
	}
	return nil
}

// waitOutput returns once the output copies of trackOutput have ended
// (every writer of the pipes is gone).
func (pio *procIO) waitOutput() { pio.out.Wait() }

// hostConsole finds the caller's terminal among its stdio, else /dev/tty.
func hostConsole(stdio runtime.Stdio) (console.Console, error) {
	for _, s := range []any{stdio.Stderr, stdio.Stdout, stdio.Stdin} {
		f, ok := s.(*os.File)
		if !ok {
			continue
		}
		c, err := console.ConsoleFromFile(f)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, console.ErrNotAConsole) {
			return nil, fmt.Errorf("unable to get console: %w", err)
		}
	}
	tty, err := os.Open("/dev/tty")
	if err != nil {
		return nil, fmt.Errorf("process.terminal is true but there is no terminal to attach to: %w", err)
	}
	c, err := console.ConsoleFromFile(tty)
	if err != nil {
		return nil, fmt.Errorf("unable to get console: %w", err)
	}
	return c, nil
}

// relay receives the pty master and copies it to and from the caller.
func (pio *procIO) relay(sock *os.File, stdio runtime.Stdio) error {
	f, err := recvFile(sock)
	if err != nil {
		return err
	}
	c, err := console.ConsoleFromFile(f)
	if err != nil {
		return err
	}
	if err := console.ClearONLCR(c.Fd()); err != nil {
		return err
	}
	pio.console = c
	if err := pio.host.SetRaw(); err != nil {
		return fmt.Errorf("set the terminal raw: %w", err)
	}
	_ = c.ResizeFrom(pio.host)
	if stdio.Stdin != nil {
		go func() { _, _ = io.Copy(c, stdio.Stdin) }()
	}
	out := stdio.Stdout
	if out == nil {
		out = io.Discard
	}
	pio.wg.Add(1)
	go func() {
		defer pio.wg.Done()
		_, _ = io.Copy(out, c) // ends with EIO once the last slave closes
	}()
	return nil
}

// waitConsole waits for the foreground pty to arrive.
func (pio *procIO) waitConsole() error {
	if pio.consoleC == nil {
		return nil
	}
	return <-pio.consoleC
}

// resize copies the host terminal size to the container's pty.
func (pio *procIO) resize() {
	if pio.console != nil && pio.host != nil {
		_ = pio.console.ResizeFrom(pio.host)
	}
}

// closePostStart closes what only the start needed (console sockets).
func (pio *procIO) closePostStart() {
	for _, c := range pio.postStart {
		_ = c.Close()
	}
	pio.postStart = nil
}

// close ends the relay and restores the host terminal.
func (pio *procIO) close() {
	pio.closePostStart()
	pio.wg.Wait()
	if pio.console != nil {
		_ = pio.console.Close()
	}
	if pio.host != nil {
		_ = pio.host.Reset()
	}
}

// recvFile receives one file descriptor sent with SCM_RIGHTS.
func recvFile(sock *os.File) (*os.File, error) {
	name := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), name, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("receive console: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("receive console: bad control message (%d, %v)", len(msgs), err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, fmt.Errorf("receive console: expected one fd (%v)", err)
	}
	return os.NewFile(uintptr(fds[0]), string(name[:n])), nil
}
