//go:build linux

package linux

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/opencontainers/runc/libcontainer/system"
	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/linux/guardstub"
)

// The lifetime guard (runtime.Guarder): a small process per guarding
// process (the skill runner: skill run, skill exec, sandbox, mcp serve,
// skill prepare), started at its first guarded container. It is this
// binary re-executed as `BINARY GuardArg`, in a session of its own (a
// signal to the runner's process group does not reach it), holding the
// read end of a pipe only the runner writes to. The runner registers each
// guarded container before creating it ("add": state root, cgroup driver,
// ID, what to remove after it), sets its deadline when its clock starts
// ("deadline") and unregisters it once it has removed it ("del"); one
// JSON object a line, each line one write of less than PIPE_BUF bytes.
//
// When the pipe ends (every copy of its write end is closed: the runner
// is gone, whatever killed it), everything still registered is orphaned:
// the guard force-deletes each container (Delete with force: every
// process killed, state and cgroups removed; the mounts and the network
// namespace go with the processes), removes the paths registered with it
// once their lock file is free, and exits. A registration is in the pipe
// before the container exists, so a runner killed at any point leaves
// nothing the guard does not know of. At a container's deadline the guard
// SIGKILLs every process of it, even while the runner lives (stuck, or
// stopped): the wall-clock limit does not depend on the runner.
//
// Until there is work, the guard is only its C stub (package guardstub):
// a process that has paid its exec and waits in poll(2), with neither the
// Go runtime nor this binary's package initialisation started. The runner
// keeps, besides the pipe, a timerfd armed to its earliest deadline, or
// to now once half the pipe waits unread, and an eventfd counting what it
// registered and has not released; the stub lets the Go guard (guardMain)
// start when the timer fires or when the pipe ends with the count above
// zero, and exits at once when it ends at zero (the usual end of a skill
// run). The Go guard too reads the pipe only when the timer fires, at a
// deadline it knows of (before it kills) or when the pipe ends
// (readGuardMsgsOnTimer): the lines of a long-lived runner (a warm call's
// deadline, a sandbox's add, init and del) wake neither.
// Measured per guard's life (BenchmarkGuard): 0.43-0.50 ms of CPU and
// 1.2 MiB resident as a stub, 1.0-1.4 ms and 25 MiB once the Go guard
// runs. At a clean exit the caller ends and reaps its guard (CloseGuard).
//
// The runner watches the guard in turn (the guard holds the write end of
// a second pipe and never writes to it): a guard that died is started
// again and told everything still registered.

// GuardArg is the first argument of `BINARY GuardArg`, the lifetime
// guard. Every binary that links this package becomes the guard when
// started so (its package initialisation dispatches it, as containerinit
// does the container's init), before the rest of the binary starts.
const GuardArg = "__skillrun-guard"

func init() {
	if len(os.Args) == 2 && os.Args[1] == GuardArg {
		if err := guardMain(); err != nil {
			fmt.Fprintln(os.Stderr, "skillrun guard:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// guardMsg is one line of the guard's protocol.
type guardMsg struct {
	// Op is "add", "deadline", "init" or "del".
	Op   string `json:"op"`
	Root string `json:"root"`
	ID   string `json:"id"`
	// Systemd and Rootless are the back end's cgroup driver and rootless
	// cgroups setting: the guard deletes with the same ones ("add").
	Systemd  bool `json:"systemd,omitempty"`
	Rootless bool `json:"rootless,omitempty"`
	// Lock and Remove are runtime.GuardOpts' ("add").
	Lock   string   `json:"lock,omitempty"`
	Remove []string `json:"remove,omitempty"`
	// Keep: when the runner is gone, kill the container's processes but
	// keep its state, for its own caller to delete ("add"; the egress
	// helper of a detached container).
	Keep bool `json:"keep,omitempty"`
	// InitPid and InitStart are the container's init, its pid and start
	// time (clock ticks after boot) ("init"; "add" when the runner sends
	// its registrations again): a kept container is killed only while
	// that process lives, never a later container of the same ID.
	InitPid   int    `json:"init_pid,omitempty"`
	InitStart uint64 `json:"init_start,omitempty"`
	// At is the deadline on CLOCK_MONOTONIC, in nanoseconds ("add",
	// "deadline"); 0: none.
	At int64 `json:"at,omitempty"`
}

type guardKey struct{ root, id string }

func (m *guardMsg) key() guardKey { return guardKey{m.Root, m.ID} }

// monoNow reads CLOCK_MONOTONIC, the clock deadlines are on: the same in
// the runner and the guard, and it does not jump with the wall clock.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// monoAt is t on CLOCK_MONOTONIC (0 for the zero time).
func monoAt(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	at := monoNow() + int64(time.Until(t))
	if at <= 0 {
		at = 1
	}
	return at
}

// guardState is what a guard knows: the registered containers.
type guardState struct {
	entries map[guardKey]*guardMsg
}

func newGuardState() *guardState { return &guardState{entries: map[guardKey]*guardMsg{}} }

// apply applies one message of the protocol.
func (s *guardState) apply(m guardMsg) {
	switch m.Op {
	case "add":
		if runtime.ValidateID(m.ID) != nil || !filepath.IsAbs(m.Root) {
			return
		}
		cp := m
		s.entries[m.key()] = &cp
	case "deadline":
		if e, ok := s.entries[m.key()]; ok {
			e.At = m.At
		}
	case "init":
		if e, ok := s.entries[m.key()]; ok {
			e.InitPid, e.InitStart = m.InitPid, m.InitStart
		}
	case "del":
		delete(s.entries, m.key())
	}
}

// due returns the containers whose deadline is at or before now, and
// clears their deadlines (each is killed once).
func (s *guardState) due(now int64) []guardMsg {
	var out []guardMsg
	for _, e := range s.entries {
		if e.At != 0 && e.At <= now {
			out = append(out, *e)
			e.At = 0
		}
	}
	return out
}

// next is the earliest deadline (0: none).
func (s *guardState) next() int64 {
	var n int64
	for _, e := range s.entries {
		if e.At != 0 && (n == 0 || e.At < n) {
			n = e.At
		}
	}
	return n
}

// orphans are the containers still registered.
func (s *guardState) orphans() []guardMsg {
	out := make([]guardMsg, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, *e)
	}
	return out
}

// guardActions are what a guard does to containers.
type guardActions interface {
	// kill SIGKILLs every process of the container (its deadline).
	kill(m guardMsg)
	// remove force-deletes the container and removes its paths (its
	// runner is gone).
	remove(m guardMsg)
}

// runGuard is the guard's loop: it applies msgs until the channel closes
// (the runner is gone), killing containers at their deadlines (now reads
// the clock), then removes every container still registered, in
// parallel, and returns once all are removed.
//
// With refresh set, msgs comes from a reader that reads the pipe only
// when asked (readGuardMsgsOnTimer): what it knows may be behind what the
// runner sent. At a deadline it calls refresh instead of killing, and
// kills what is due when the reader's "tick" comes, which follows
// everything it read: never on a stale deadline.
func runGuard(msgs <-chan guardMsg, act guardActions, now func() int64, refresh func()) {
	s := newGuardState()
	timer := time.NewTimer(time.Duration(math.MaxInt64))
	defer timer.Stop()
	var kills sync.WaitGroup
	killDue := func() {
		for _, d := range s.due(now()) {
			kills.Add(1)
			go func() {
				defer kills.Done()
				act.kill(d)
			}()
		}
	}
	arm := func() {
		timer.Stop()
		if n := s.next(); n != 0 {
			timer.Reset(time.Duration(max(n-now(), 0)))
		}
	}
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				orphans := s.orphans()
				var wg sync.WaitGroup
				sem := make(chan struct{}, 16)
				for _, o := range orphans {
					wg.Add(1)
					sem <- struct{}{}
					go func() {
						defer wg.Done()
						defer func() { <-sem }()
						if o.Keep {
							act.kill(o)
						} else {
							act.remove(o)
						}
					}()
				}
				wg.Wait()
				kills.Wait()
				return
			}
			if m.Op == opTick {
				killDue() // after everything the reader read
			} else {
				s.apply(m)
			}
		case <-timer.C:
			if refresh != nil {
				refresh() // a tick follows what it reads
				continue
			}
			killDue()
		}
		arm()
	}
}

// guardMain is the guard process once its stub (package guardstub) has
// handed over: descriptor 3 is the command pipe, 4 the pipe whose end
// tells the runner the guard is gone, 5 and 6 the stub's timer and count
// (the timer wakes it to read the pipe; the count is the stub's only).
func guardMain() error {
	for fd := guardstub.FdCommands; fd <= guardstub.FdCount; fd++ {
		unix.CloseOnExec(fd)
	}
	_ = os.Unsetenv(guardstub.EnvStub)
	msgs := make(chan guardMsg, 16)
	var refresh func()
	if ask, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err == nil && isTimerfd(guardstub.FdTimer) &&
		unix.SetNonblock(guardstub.FdTimer, true) == nil && unix.SetNonblock(guardstub.FdCommands, true) == nil {
		go readGuardMsgsOnTimer(guardstub.FdCommands, guardstub.FdTimer, ask, msgs)
		refresh = func() { _, _ = unix.Write(ask, []byte{1, 0, 0, 0, 0, 0, 0, 0}) }
	} else {
		in := os.NewFile(guardstub.FdCommands, "guard")
		if in == nil {
			return errors.New("no command pipe on descriptor 3")
		}
		go readGuardMsgs(in, msgs)
	}
	// A removal is tried for 5 s, as a kill is: under load (CI's two
	// cores, 50 runs killed at once) a create cut short kept its bundle
	// busy past the 0.5 s it had (TestLifetimeSoak left a bundle folder
	// in two CI runs in a row).
	runGuard(msgs, osGuard{lockAttempts: 200, removeAttempts: 250}, monoNow, refresh)
	return nil
}

// readGuardMsgs decodes the command pipe's lines into msgs and closes it
// at the pipe's end (a line cut by the runner's death is dropped).
func readGuardMsgs(in *os.File, msgs chan<- guardMsg) {
	defer close(msgs)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		var m guardMsg
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			msgs <- m
		}
	}
}

// opTick is the message readGuardMsgsOnTimer sends after each read of
// the pipe (never on the pipe itself).
const opTick = "tick"

// readGuardMsgsOnTimer is readGuardMsgs for a guard with its runner's
// timer (a timerfd, the stub's, made non-blocking, as the pipe): the
// pipe is read only when the timer expires (the runner keeps it armed to
// its earliest deadline, or to now once half the pipe waits unread),
// when runGuard asks (the eventfd ask: a deadline of its own came) and at
// its end; each read is followed by a "tick". In between the guard
// sleeps in poll(2), and what the runner sends (a warm call's deadline,
// a sandbox's add, init and del) waits in the pipe without waking it: a
// running Go guard would otherwise wake for every line, on a CPU the
// sandboxes use.
func readGuardMsgsOnTimer(in, timer, ask int, msgs chan<- guardMsg) {
	defer close(msgs)
	fds := []unix.PollFd{{Fd: int32(in)}, {Fd: int32(timer), Events: unix.POLLIN}, {Fd: int32(ask), Events: unix.POLLIN}} // the pipe: its end only
	buf := make([]byte, 64<<10)
	var line []byte
	for {
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			// Never taken for the runner's end: try again.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		var ticks [8]byte
		_, _ = unix.Read(timer, ticks[:]) // EAGAIN when it was not the timer
		_, _ = unix.Read(ask, ticks[:])
		for {
			n, err := unix.Read(in, buf)
			if err == unix.EINTR {
				continue
			}
			if err == unix.EAGAIN {
				msgs <- guardMsg{Op: opTick}
				break // all read: wait again
			}
			if n <= 0 {
				return // the runner is gone (a line it cut is dropped)
			}
			for rest := buf[:n]; len(rest) > 0; {
				i := bytes.IndexByte(rest, '\n')
				if i < 0 {
					if len(line)+len(rest) <= 1<<20 {
						line = append(line, rest...)
					}
					break
				}
				line = append(line, rest[:i]...)
				rest = rest[i+1:]
				var m guardMsg
				if json.Unmarshal(line, &m) == nil {
					msgs <- m
				}
				line = line[:0]
			}
		}
	}
}

// isTimerfd reports whether fd is a timerfd.
func isTimerfd(fd int) bool {
	l, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	return err == nil && l == "anon_inode:[timerfd]"
}

// osGuard does the guard's work with this package's verbs.
type osGuard struct {
	// lockAttempts bounds the wait for a dead runner's lock (5 ms apart),
	// removeAttempts the retries of a removal (20 ms apart).
	lockAttempts, removeAttempts int
}

func guardRuntime(m guardMsg) *Runtime {
	return &Runtime{root: m.Root, systemd: m.Systemd, rootlessCgroups: m.Rootless, warn: func(string) {}}
}

// kill SIGKILLs every process of the container, trying again (100 ms
// apart, 5 s at most) while it cannot: a create still under way (its
// state not written yet), a state being rewritten. A kept container
// (an egress helper's) is killed only when its registered init still
// runs and is the container's: without an init told, its create cannot
// have let the init go on (the handoff waits for the helper).
func (osGuard) kill(m guardMsg) {
	r := guardRuntime(m)
	if m.Keep {
		if !r.isInit(m.ID, m.InitPid, m.InitStart) {
			return
		}
		_ = r.Kill(context.Background(), m.ID, unix.SIGKILL, true)
		return
	}
	for attempt := 0; attempt < 50; attempt++ {
		err := r.Kill(context.Background(), m.ID, unix.SIGKILL, true)
		if err == nil || errors.Is(err, runtime.ErrNotRunning) {
			return
		}
		if errors.Is(err, runtime.ErrNotExist) && !r.exists(m.ID) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// isInit reports whether pid, started at start, lives and is the init of
// container id.
func (r *Runtime) isInit(id string, pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	st, err := system.Stat(pid)
	if err != nil || st.StartTime != start || st.State == system.Zombie || st.State == system.Dead {
		return false
	}
	s, err := r.State(context.Background(), id)
	return err == nil && s.Pid == pid
}

// exists reports whether anything of container id is under the state
// root: its state folder or its lock file (a create under way).
func (r *Runtime) exists(id string) bool {
	_, serr := os.Lstat(r.stateDir(id))
	_, lerr := os.Lstat(filepath.Join(r.root, lockDirName, id))
	return serr == nil || lerr == nil
}

func (g osGuard) remove(m guardMsg) {
	r := guardRuntime(m)
	// Neither a state folder nor a lock file: the runner died before the
	// container's create began (or after its removal), and nothing of it
	// exists.
	if r.exists(m.ID) {
		for attempt := 0; attempt < 3; attempt++ {
			err := r.Delete(context.Background(), m.ID, true)
			if err == nil || errors.Is(err, runtime.ErrNotExist) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	g.removeUnlocked(m.Lock, m.Remove)
}

// removeUnlocked removes the paths of remove, then lock, when lock (if
// set) is a regular file of this user that nobody holds a flock on (or
// will soon: a second at most).
func (g osGuard) removeUnlocked(lock string, remove []string) {
	if lock != "" {
		f, err := os.OpenFile(lock, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return
		}
		defer f.Close()
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil || int(st.Uid) != os.Geteuid() || st.Mode&unix.S_IFMT != unix.S_IFREG {
			return
		}
		// The runner's exit closes the pipe and this file's lock in the
		// order of their descriptors: its lock may outlive the pipe's end
		// by a few microseconds.
		for attempt := 0; ; attempt++ {
			err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			if err == nil {
				break
			}
			if err != unix.EWOULDBLOCK || attempt == g.lockAttempts {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// A container whose create the runner's death cut short may still
	// have an init process setting up its root (mount points made in the
	// bundle's rootfs) for a few milliseconds: a removal that meets it
	// is tried again. The lock file goes only with everything else, so
	// that what could not be removed is still found (runner.CollectStale).
	left := false
	for _, p := range remove {
		if !filepath.IsAbs(p) {
			continue
		}
		err := os.RemoveAll(p)
		for attempt := 0; err != nil && attempt < g.removeAttempts; attempt++ {
			time.Sleep(20 * time.Millisecond)
			err = os.RemoveAll(p)
		}
		left = left || err != nil
	}
	if lock != "" && !left {
		_ = os.Remove(lock)
	}
}
