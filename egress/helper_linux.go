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

	"github.com/skillrun/skillrun/egress/nsinit"
	"github.com/skillrun/skillrun/egress/policy"
)

// HelperArg is the first argument of `BINARY HelperArg ALLOW RESOLVE ...`,
// the detached egress server the Linux back end starts for a container
// whose spec asks for an allowlist through annotations (plain OCI bundles,
// as containerd or podman create them) when no caller serves it: it
// inherits the handoff listener as descriptor 3, receives the sandbox's
// sockets from the container's init and serves them until that init
// exits. The back end adds its own arguments after these two and calls
// HelperMain with ALLOW and RESOLVE.
const HelperArg = "__skillrun-egress-helper"

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

// ListenPrivate makes the handoff socket in a new private folder (short
// path, 0700) that uid and gid (when not -1: the host IDs of the
// container's root) own, and returns the listener's
// file for a helper to inherit, and a function that removes both.
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
	h, err := Listen(filepath.Join(dir, nsinit.SocketName), uid, gid)
	if err != nil {
		cleanup()
		return "", nil, nil, err
	}
	// The helper owns the socket from now on: the file is a dup, and the
	// listener here must not unlink it when it is closed.
	h.l.SetUnlinkOnClose(false)
	file, err = h.l.File()
	h.l.Close()
	if err != nil {
		cleanup()
		return "", nil, nil, fmt.Errorf("egress: %w", err)
	}
	return h.path, file, cleanup, nil
}
