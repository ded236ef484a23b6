//go:build linux

package linux

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/system"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/egress/handoff"
	"github.com/skillrun/skillrun/egress/policy"
	"github.com/skillrun/skillrun/runtime"
)

// egressHandoff connects to the egress server's handoff socket sock, when
// set, for the container's init: passed as the last of the init's extra
// files, it is the connection the init (package egress/nsinit, before
// libcontainer's init and any of the container's code) binds the
// sandbox's sockets for and hands them over. The init refuses to go on if
// the handoff fails, so a sandbox never runs without its sockets handed
// over. A spec asking for an allowlist without a socket, or an allowlist
// without a network namespace of its own, is refused: it would run with
// no filter or no network namespace.
func egressHandoff(config *configs.Config, spec *specs.Spec, sock string) (*os.File, error) {
	allow := spec.Annotations[policy.AnnotationAllow]
	if sock == "" {
		if allow != "" {
			return nil, fmt.Errorf("annotation %s: the network allowlist needs an egress server, and none was started for this container", policy.AnnotationAllow)
		}
		return nil, nil
	}
	if !config.Namespaces.Contains(configs.NEWNET) || config.Namespaces.PathOf(configs.NEWNET) != "" {
		return nil, errors.New("network allowlist: the container needs a new network namespace of its own (linux.namespaces: network, without a path)")
	}
	return handoff.Dial(sock)
}

// startEgressHelper starts, when spec asks for an allowlist through its
// annotations and no caller serves it (plain OCI bundles: run, create and
// start by hand or by containerd and podman), a detached egress server
// for container id (handoff.HelperArg, EgressHelperMain, in this program
// or the one Options.EgressHelper names): it inherits the
// handoff listener, receives the sandbox's sockets from the container's
// init during create and serves them until the container's init exits.
// It returns the handoff socket, and done, to call once create is over:
// done(false) (create failed) kills the helper and removes its socket;
// done(true) leaves it to live on its own.
func (r *Runtime) startEgressHelper(spec *specs.Spec, id string) (sock string, done func(ok bool), err error) {
	allow := spec.Annotations[policy.AnnotationAllow]
	if allow == "" {
		return "", func(bool) {}, nil
	}
	resolve := spec.Annotations[policy.AnnotationResolve]
	// Refuse a bad allowlist before anything starts.
	if _, err := policy.FromAnnotations(allow, resolve); err != nil {
		return "", nil, fmt.Errorf("annotation %s: %w", policy.AnnotationAllow, err)
	}
	prog := "/proc/self/exe"
	if r.egressHelper != nil {
		if prog, err = r.egressHelper(); err != nil {
			return "", nil, fmt.Errorf("annotation %s: %w", policy.AnnotationAllow, err)
		}
	}
	// Only this process connects to it: it stays this user's.
	path, file, cleanup, err := handoff.ListenPrivate(-1, -1)
	if err != nil {
		return "", nil, err
	}
	defer file.Close()
	// Descriptors this process inherited without close-on-exec must not
	// live on in the helper: a pipe held open there would keep a caller
	// (containerd's shim) waiting for EOF. Those create passes to the
	// container (--preserve-fds) still reach it: exec dups them into
	// place whatever their flag here.
	closeOnExecFrom(3)
	cmd := exec.Command(prog, handoff.HelperArg, allow, resolve, r.root, id,
		strconv.FormatBool(r.systemd), strconv.FormatBool(r.rootlessCgroups))
	cmd.ExtraFiles = []*os.File{file}
	// Its own session: signals to the caller's process group (a ^C of
	// `run`) do not reach it; it ends with the container's init.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("egress helper: %w", err)
	}
	done = func(ok bool) {
		if ok {
			// It lives on its own. A caller that lives on (the OpenShell
			// driver, one helper per container start) reaps it when it
			// ends; one that exits first leaves it to whoever inherits it
			// (init, or containerd's shim as a subreaper).
			go func() { _ = cmd.Wait() }()
			return
		}
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		cleanup()
	}
	return path, done, nil
}

// closeOnExecFrom marks every open descriptor from fd up close-on-exec.
func closeOnExecFrom(fd int) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= fd {
			unix.CloseOnExec(n)
		}
	}
}

// ServeEgress is the egress server of a helper (egress.HelperMain): it
// serves the allowlist of allow and resolve (the annotations' values) on
// the handoff listener inherited as descriptor 3 until the container's
// init has exited (initExited), a signal or an error, and calls onInit
// with a pidfd of the init before the init may go on.
type ServeEgress func(allow, resolve string, onInit func(pidfd *os.File) error) (initExited bool, err error)

// EgressHelperMain is the egress helper's process (`BINARY handoff.HelperArg
// ALLOW RESOLVE ROOT ID SYSTEMD ROOTLESS`, started by startEgressHelper):
// through serve it serves the allowlist of container ID under state root
// ROOT, and ties the container to its own life. The container is registered with a
// lifetime guard of this process in keep mode, and the identity of its
// init (pid and start time) is told to the guard before the handoff lets
// the init go on: when this process dies by any means while that init
// lives (SIGKILL, an OOM kill), the guard SIGKILLs every process of the
// container, whose network is gone with the helper; its state stays for
// its caller (containerd's shim, podman) to see it stopped and delete it,
// as a detached container's must. Only that init's container is killed:
// a later container of the same ID (a restart) is not this helper's. The
// guard is released once the init has exited.
func EgressHelperMain(args []string, serve ServeEgress) error {
	if len(args) != 6 {
		return errors.New("egress helper: want ALLOW RESOLVE ROOT ID SYSTEMD ROOTLESS")
	}
	systemd, err1 := strconv.ParseBool(args[4])
	rootless, err2 := strconv.ParseBool(args[5])
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("egress helper: %w", err)
	}
	r := &Runtime{root: args[2], systemd: systemd, rootlessCgroups: rootless, warn: func(string) {},
		guards: newGuardClient("/proc/self/exe")}
	id := args[3]
	g, err := r.guard(id, runtime.GuardOpts{}, true)
	if err == nil {
		err = g.Ready()
	}
	if err != nil {
		return fmt.Errorf("egress helper: %w", err)
	}
	onInit := func(pidfd *os.File) error {
		pid, err := pidfdPid(pidfd)
		if err != nil {
			return fmt.Errorf("egress helper: the container's init: %w", err)
		}
		st, err := system.Stat(pid)
		if err != nil {
			return fmt.Errorf("egress helper: the container's init: %w", err)
		}
		return g.(*guard).setInit(pid, st.StartTime)
	}
	exited, err := serve(args[0], args[1], onInit)
	if exited {
		g.Release()
	}
	// Still registered (a signal, an error): the guard kills what is left
	// of the container as this process ends.
	r.CloseGuard(100 * time.Millisecond)
	return err
}

// pidfdPid is the pid (in this process' pid namespace) of the process
// pidfd refers to, from /proc/self/fdinfo.
func pidfdPid(pidfd *os.File) (int, error) {
	data, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(int(pidfd.Fd())))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "Pid:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || pid <= 0 {
				return 0, fmt.Errorf("pidfd of no live process (Pid: %s)", strings.TrimSpace(v))
			}
			return pid, nil
		}
	}
	return 0, errors.New("not a pidfd")
}
