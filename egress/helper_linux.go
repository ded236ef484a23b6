//go:build linux

package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/egress/policy"
)

// helperAcceptTimeout bounds the wait for the runtime's connection and the
// container's init: the container's create must have started its init by
// then.
const helperAcceptTimeout = 2 * time.Minute

// HelperMain is the helper's whole life, serving the allowlist of allow
// and resolve (the annotations' values). It returns when the container's
// init has exited (initExited), on SIGTERM, SIGINT or SIGHUP, or on
// error; the caller exits. The listener's folder (a private temporary
// folder made for it) is removed once the runtime has connected or the
// wait ends. onInit, when set, is called with a pidfd of the container's
// init once its sockets are received and before the init may go on
// (not at all on a kernel without pidfds); its error fails the handoff,
// and so the container's create.
func HelperMain(allow, resolve string, onInit func(pidfd *os.File) error) (initExited bool, err error) {
	pol, err := policy.FromAnnotations(allow, resolve)
	if err != nil {
		return false, fmt.Errorf("egress helper: %w", err)
	}
	f := os.NewFile(3, "handoff")
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return false, fmt.Errorf("egress helper: handoff listener: %w", err)
	}
	ul, ok := ln.(*net.UnixListener)
	if !ok {
		ln.Close()
		return false, errors.New("egress helper: descriptor 3 is not a unix listener")
	}
	path := ul.Addr().String()
	ul.SetUnlinkOnClose(true)
	h := &Handoff{l: ul, path: path}
	if onInit != nil {
		h.beforeAck = func(s *Sockets) error {
			if s.Init == nil {
				return nil
			}
			return onInit(s.Init)
		}
	}
	defer os.Remove(filepath.Dir(path))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	actx, cancel := context.WithTimeout(ctx, helperAcceptTimeout)
	socks, err := h.Accept(actx, pol.Ports())
	cancel()
	os.Remove(filepath.Dir(path))
	if err != nil {
		return false, err
	}
	sctx, cancelServe := context.WithCancel(ctx)
	defer cancelServe()
	exited := make(chan struct{})
	if socks.Init != nil {
		// The pidfd becomes readable when the init exits.
		pidfd := int(socks.Init.Fd())
		go func() {
			fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
			for {
				_, err := unix.Poll(fds, -1)
				if err == unix.EINTR {
					continue
				}
				break
			}
			close(exited)
			cancelServe()
		}()
	}
	Serve(sctx, socks, pol)
	select {
	case <-exited:
		return true, nil
	default:
		return false, nil
	}
}
