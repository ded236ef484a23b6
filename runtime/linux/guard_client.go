//go:build linux

package linux

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/linux/guardstub"
)

// The runner side of the lifetime guard (guard.go): the guard process of
// this process, started at its first guarded container, and what it is told.

// guardClient is this process' guard: the running guard process (if
// any) and what this process registered with it.
type guardClient struct {
	mu      sync.Mutex
	cur     *guardProc
	entries map[guardKey]*guardMsg
	// exe is the binary started as the guard.
	exe string
}

// guardProc is one guard process as its runner sees it.
type guardProc struct {
	w     *os.File      // the command pipe's write end
	ready chan struct{} // closed once the process is started, or failed to
	err   error         // why it failed to start (set before ready closes)
	cmd   *exec.Cmd
	done  chan struct{} // closed once the process has been waited for
	// timer and count are the stub's timerfd and eventfd (package
	// guardstub), -1 when none. The timer stays armed to the earliest
	// deadline, or to now while more than drainAt bytes (half the pipe)
	// wait in the pipe: the guard reads the pipe only when it expires
	// (the stub never reads it; the Go guard when it wakes) or ends.
	timer, count int
	drainAt      int
}

// failed reports whether the process could not be started.
func (p *guardProc) failed() bool {
	select {
	case <-p.ready:
		return p.err != nil
	default:
		return false
	}
}

// close releases the runner's ends of p (the guard sees the pipe end).
func (p *guardProc) close() {
	p.w.Close()
	for _, fd := range []*int{&p.timer, &p.count} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// write writes one message line (arm, after it, sets the timer).
func (p *guardProc) write(line []byte) error {
	_, err := p.w.Write(line)
	return err
}

// arm sets the guard's timer to at on CLOCK_MONOTONIC (0: disarmed), or
// to now (expired at once) when more than drainAt bytes wait unread in
// the pipe: the stub lets the Go guard start, the Go guard reads them.
func (p *guardProc) arm(at int64) {
	if p.timer < 0 {
		return
	}
	if p.unread() > p.drainAt {
		at = 1
	}
	_ = unix.TimerfdSettime(p.timer, unix.TFD_TIMER_ABSTIME, &unix.ItimerSpec{Value: unix.NsecToTimespec(at)}, nil)
}

// unread is how many bytes wait in the command pipe (FIONREAD, alias
// TIOCINQ, which a pipe answers on either end); more than drainAt when
// it cannot tell.
func (p *guardProc) unread() int {
	n := p.drainAt + 1
	if sc, err := p.w.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) {
			if v, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
				n = v
			}
		})
	}
	return n
}

// counted adds n (1 or -1) to the stub's count of registered containers.
func (p *guardProc) counted(n int) {
	if p.count < 0 {
		return
	}
	var b [8]byte
	if n > 0 {
		b[0] = byte(n) // little endian, n < 256
		_, _ = unix.Write(p.count, b[:])
	} else {
		_, _ = unix.Read(p.count, b[:]) // EFD_SEMAPHORE: minus one
	}
}

// newGuardClient is a runner's guard client, starting exe as its guard.
func newGuardClient(exe string) *guardClient {
	return &guardClient{entries: map[guardKey]*guardMsg{}, exe: exe}
}

// Guard implements runtime.Guarder. It returns at once: the guard process
// is started in the background when this process has none, and Run and
// Create of the ID wait for it (waitGuard).
func (r *Runtime) Guard(id string, o runtime.GuardOpts) (runtime.Guard, error) {
	return r.guard(id, o, false)
}

// guard is Guard; keep has the guard only kill the container's processes
// when this process dies, leaving its state (and o's paths) to its
// caller: the egress helper of a detached container.
func (r *Runtime) guard(id string, o runtime.GuardOpts, keep bool) (runtime.Guard, error) {
	if err := runtime.ValidateID(id); err != nil {
		return nil, err
	}
	if r.guards == nil {
		return nil, errors.New("lifetime guard: this runtime cannot guard (not made by New)")
	}
	m := &guardMsg{Op: "add", Root: r.root, ID: id, Systemd: r.systemd, Rootless: r.rootlessCgroups,
		Lock: o.Lock, Remove: append([]string(nil), o.Remove...), Keep: keep}
	if err := r.guards.add(m); err != nil {
		return nil, err
	}
	return &guard{c: r.guards, key: m.key()}, nil
}

// guard is one guarded container (runtime.Guard).
type guard struct {
	c    *guardClient
	key  guardKey
	once sync.Once
}

func (g *guard) SetDeadline(t time.Time) error { return g.c.deadline(g.key, monoAt(t)) }

func (g *guard) Ready() error { return g.c.wait(g.key) }
func (g *guard) Release()     { g.once.Do(func() { g.c.del(g.key) }) }

// setInit tells the guard which process is the container's init (its pid
// and start time): a keep-mode guard kills the container only while that
// process lives.
func (g *guard) setInit(pid int, start uint64) error { return g.c.setInit(g.key, pid, start) }

// The stub's count goes up before a registration is written and down
// after its release is: whenever the runner dies, a count of zero means
// nothing is left for the guard.

func (c *guardClient) add(m *guardMsg) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[m.key()]; ok {
		return fmt.Errorf("container %s is already guarded", m.ID)
	}
	c.entries[m.key()] = m
	if c.cur == nil || c.cur.failed() {
		if err := c.startLocked(); err != nil {
			delete(c.entries, m.key())
			return err
		}
		return nil // startLocked sent every entry
	}
	c.cur.counted(1)
	c.sendLocked(m)
	return nil
}

func (c *guardClient) deadline(k guardKey, at int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.entries[k]
	if !ok {
		return errors.New("container not guarded")
	}
	m.At = at
	if c.cur == nil {
		return errors.New("no guard process")
	}
	c.sendLocked(&guardMsg{Op: "deadline", Root: k.root, ID: k.id, At: at})
	return nil
}

func (c *guardClient) setInit(k guardKey, pid int, start uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.entries[k]
	if !ok {
		return errors.New("container not guarded")
	}
	m.InitPid, m.InitStart = pid, start
	if c.cur == nil {
		return errors.New("no guard process")
	}
	c.sendLocked(&guardMsg{Op: "init", Root: k.root, ID: k.id, InitPid: pid, InitStart: start})
	return nil
}

func (c *guardClient) del(k guardKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; !ok {
		return
	}
	delete(c.entries, k)
	if c.cur != nil {
		p := c.cur
		c.sendLocked(&guardMsg{Op: "del", Root: k.root, ID: k.id})
		if c.cur == p {
			p.counted(-1)
		}
	}
}

// nextLocked is the earliest registered deadline (0: none).
func (c *guardClient) nextLocked() int64 {
	var n int64
	for _, m := range c.entries {
		if m.At != 0 && (n == 0 || m.At < n) {
			n = m.At
		}
	}
	return n
}

// sendLocked writes m to the running guard and sets its timer (the
// earliest deadline, or now to have the pipe read). A failed write means
// the guard is gone: a new one is started and told everything registered
// (m's effect included).
func (c *guardClient) sendLocked(m *guardMsg) {
	line, err := json.Marshal(m)
	if err != nil {
		return
	}
	if err := c.cur.write(append(line, '\n')); err != nil {
		if len(c.entries) == 0 {
			c.cur.close()
			c.cur = nil
			return
		}
		_ = c.startLocked()
		return
	}
	c.cur.arm(c.nextLocked())
}

// startLocked starts a guard process in the background, replacing the
// current one (gone), and sends it every registered container. The
// messages wait in the pipe until it reads them.
func (c *guardClient) startLocked() (retErr error) {
	if old := c.cur; old != nil {
		old.close()
		c.cur = nil
	}
	var files []*os.File // the guard's descriptors 3, 4, 5, 6
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("lifetime guard: %w", err)
	}
	files = append(files, r)
	aliveR, aliveW, err := os.Pipe()
	if err != nil {
		w.Close()
		return fmt.Errorf("lifetime guard: %w", err)
	}
	files = append(files, aliveW)
	p := &guardProc{w: w, ready: make(chan struct{}), done: make(chan struct{}), timer: -1, count: -1}
	defer func() {
		if retErr != nil {
			p.close()
			aliveR.Close()
		}
	}()
	// The stub's timer and count: the guard gets its own descriptors of
	// them, the runner keeps these.
	if p.timer, err = unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC); err != nil {
		return fmt.Errorf("lifetime guard: timerfd: %w", err)
	}
	if p.count, err = unix.Eventfd(uint(len(c.entries)), unix.EFD_CLOEXEC|unix.EFD_SEMAPHORE|unix.EFD_NONBLOCK); err != nil {
		return fmt.Errorf("lifetime guard: eventfd: %w", err)
	}
	for _, fd := range []int{p.timer, p.count} {
		d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			return fmt.Errorf("lifetime guard: %w", err)
		}
		files = append(files, os.NewFile(uintptr(d), "guard"))
	}
	// Half the pipe (64 KiB, or 4 KiB when this user has used up its
	// pipe pages): the guard reads it only when its timer expires.
	p.drainAt = 2048
	if sc, err := w.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) {
			if n, err := unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0); err == nil && n/2 > p.drainAt {
				p.drainAt = n / 2
			}
		})
	}
	// Descriptors this process inherited without close-on-exec must not
	// live on in the guard (a pipe its caller waits on to end).
	closeOnExecFrom(3)
	cmd := exec.Command(c.exe, GuardArg)
	cmd.ExtraFiles = files
	cmd.Env = append(os.Environ(), guardstub.EnvStub+"=1")
	cmd.Dir = "/" // it uses absolute paths only, and must not pin the caller's folder
	// Its own session: a signal to the runner's process group (^C, a
	// supervisor's kill of the group) does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	p.cmd = cmd
	c.cur = p
	go c.run(p, cmd, files, aliveR)
	files = nil // run closes them once the guard has its copies
	for _, m := range c.entries {
		line, err := json.Marshal(m)
		if err != nil {
			continue
		}
		if err := p.write(append(line, '\n')); err != nil {
			break // the process failed: waitGuard reports it
		}
		// Each line under 4 KiB: the pipe is read before it is full.
		p.arm(c.nextLocked())
	}
	return nil
}

// run starts the guard process p (the fork and exec overlap what the
// caller does next: writing the bundle, the container's start), then
// watches it: when it dies while this process lives, a new one takes
// over.
func (c *guardClient) run(p *guardProc, cmd *exec.Cmd, files []*os.File, aliveR *os.File) {
	err := cmd.Start()
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		p.err = fmt.Errorf("lifetime guard: %w", err)
		p.w.Close() // pending writes fail with EPIPE
		close(p.ready)
		close(p.done)
		aliveR.Close()
		return
	}
	close(p.ready)
	// The guard never writes: the read ends when its copy closes, i.e.
	// when it exits.
	var b [64]byte
	for {
		if _, err := aliveR.Read(b[:]); err != nil {
			break
		}
	}
	aliveR.Close()
	_ = cmd.Wait()
	close(p.done)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == p {
		c.cur = nil
		p.close()
		if len(c.entries) > 0 {
			_ = c.startLocked()
		}
	}
}

// CloseGuard ends this runtime's lifetime guard, for a clean exit: its
// pipe closes as the exit would close it, and when nothing is registered
// any more (the usual end: every sandbox removed) it waits, up to wait,
// for the guard to exit, so that this process reaps it rather than leave
// an orphan to a parent that may never reap (an agent that is PID 1 of a
// container). What is still registered the guard removes, as after any
// end of this process. A later Guard starts a new one.
func (r *Runtime) CloseGuard(wait time.Duration) {
	c := r.guards
	if c == nil {
		return
	}
	c.mu.Lock()
	p := c.cur
	idle := len(c.entries) == 0
	c.cur = nil
	if p != nil {
		p.close()
	}
	c.mu.Unlock()
	if p == nil || !idle || p.done == nil {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	}
}

// waitGuard returns once the guard of container id (when it is guarded)
// is in place, or why it cannot be.
func (r *Runtime) waitGuard(id string) error {
	if r.guards == nil {
		return nil
	}
	return r.guards.wait(guardKey{r.root, id})
}

func (c *guardClient) wait(k guardKey) error {
	c.mu.Lock()
	_, ok := c.entries[k]
	p := c.cur
	c.mu.Unlock()
	if !ok {
		return nil
	}
	if p == nil {
		return errors.New("lifetime guard: not running")
	}
	<-p.ready
	return p.err
}
