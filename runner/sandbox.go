package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/spec"
)

// Sandbox is one run of a skill in its own container, in three steps:
// Prepare (policy, dependency environment, bundle, egress server),
// Launch (the container starts and its entry point waits for its input)
// and Call (the input goes in, the result comes out). A sandbox runs at
// most one call and is never reused; Close destroys it (kills its
// container if it still runs) and releases everything it holds. Run is
// the cold path: the same steps with the input on stdin from the start.
//
// A launched sandbox runs its entry point under an input holder, a
// /bin/sh that is the container's first process. It holds a second copy
// of the stdin pipe's write end and a control pipe from the launcher.
// Call writes the input, then the line "e" on the control pipe: only then
// does the holder close its copy, so the entry point sees the end of its
// input only after a complete input. When the launcher dies (SIGKILL,
// crash) the control pipe ends without "e": the holder SIGKILLs every
// other process of the sandbox and only then exits (which closes its
// copy). A skill's code never runs on an empty or cut input it was not
// given; the container's state, cgroups and bundle stay until
// CollectStale (the next server's start) removes them.
//
// With EntryAtLaunch the entry point starts with the sandbox and waits
// in its read of stdin; a skill that does not read its input runs to its
// end before any call (its result is the call's; EntryEnded reports it).
// With EntryAtCall the holder starts the entry point when Call sends the
// line "g" first: only the container is warm.
//
// Methods are not safe for concurrent use: end Launch or Call early
// through their context, then Close.
type Sandbox struct {
	rt     runtime.Runtime
	sk     *spec.Skill
	policy *spec.Policy
	warm   bool

	id, dir     string
	sp          *specs.Spec
	claim       *owned
	eg          *egressRun
	egressSock  string
	releaseDeps func()
	base        Result // Skill, Environment, Warnings

	runCtx context.Context
	cancel context.CancelCauseFunc
	stdout *capWriter
	stderr *capWriter
	start  time.Time // launch (cold) or input write (warm)

	// Filled by run before done is closed.
	done    chan struct{}
	status  int
	runErr  error
	info    runtime.ExitInfo
	network *Network
	cfgErr  chan error

	ran bool // run was started (done will close)

	// Warm sandboxes.
	exited    chan error // the wait's error, once the process exited (runtimes that tell)
	ours      []*os.File // our copies of the container's ends, closed once it started
	when      StartEntry
	stdinW    *os.File
	ctlW      *os.File // the holder's control pipe
	startedCh chan struct{}
	wrote     chan struct{}
	launched  bool
	called    bool

	closeOnce sync.Once
}

// StartEntry says when a launched sandbox's entry point starts.
type StartEntry int

const (
	// EntryAtLaunch starts the entry point with the sandbox: it waits
	// for its input in its read of stdin (interpreter started, imports
	// done).
	EntryAtLaunch StartEntry = iota
	// EntryAtCall starts it when the call comes (the container is ready).
	EntryAtCall
)

// The input holder (see Sandbox). $1 is "launch" or "call". fd 3 is its
// copy of the stdin pipe's write end, fd 4 tells the launcher it is in
// place ("r"), fd 5 is the control pipe ("g": start the entry point, "e":
// the input is complete). The entry point gets the pipe as stdin (kept on
// fd 6: a non-interactive shell gives background commands /dev/null) and
// none of the holder's descriptors; the holder keeps no reading end, so
// the writer sees EPIPE once the entry point is gone. The holder exits
// with the entry point's status (128+N when a signal N killed it).
const (
	holderShell  = "/bin/sh"
	holderScript = `exec 6<&0 0</dev/null
m=$1; shift
if [ "$m" = call ]; then printf r >&4; exec 4>&-; IFS= read -r g <&5 || exit 125; fi
"$@" <&6 6<&- 5<&- 4>&- 3>&- &
p=$!
exec 6<&-
[ "$m" = call ] || { printf r >&4; exec 4>&-; }
if IFS= read -r e <&5 && [ "$e" = e ]; then exec 3>&- 5<&-; else kill -KILL -1 2>/dev/null; exit 125; fi
while :; do wait "$p"; s=$?; kill -0 "$p" 2>/dev/null || exit "$s"; done`
)

// ErrArgvInput is returned by Prepare for a skill whose input becomes
// command-line arguments: its entry point cannot start before its input.
var ErrArgvInput = errors.New("input mode argv: the entry point cannot start before its input")

// ErrSandboxEnded is returned by Call when the launched sandbox ended
// before its call (nothing ran with the input: run the input elsewhere).
var ErrSandboxEnded = errors.New("the warm sandbox ended before its call")

// Prepare resolves sk's policy with opts, acquires its dependency
// environment, writes its bundle and starts its egress server: all a
// sandbox needs before Launch, whose entry point starts as when says. A
// policy refusal is returned as a Result (StoppedReason "policy"), not a
// Sandbox. Skills in input mode argv, and opts.Command, are refused with
// ErrArgvInput (they run cold only).
func Prepare(ctx context.Context, rt runtime.Runtime, sk *spec.Skill, opts Options, when StartEntry) (*Sandbox, *Result, error) {
	if sk.Input.Mode == spec.InputArgv || opts.Command != nil {
		return nil, nil, fmt.Errorf("skill %q: %w", sk.Name, ErrArgvInput)
	}
	sb, res, err := prepare(ctx, rt, sk, nil, opts, true)
	if sb != nil {
		sb.when = when
		mode := "launch"
		if when == EntryAtCall {
			mode = "call"
		}
		sb.sp.Process.Args = append([]string{holderShell, "-c", holderScript, "skillrun-input-holder", mode}, sb.sp.Process.Args...)
	}
	return sb, res, err
}

// EntryEnded reports whether a launched sandbox's entry point has ended
// before its call (it did not wait for its input: a skill that ignores
// it). Call still returns that run's result.
func (s *Sandbox) EntryEnded() bool {
	if !s.launched || s.called || s.when != EntryAtLaunch {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(s.stdinW.Fd()), Events: unix.POLLOUT}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 1 && fds[0].Revents&unix.POLLERR != 0
}

// ID returns the sandbox's container ID.
func (s *Sandbox) ID() string { return s.id }

// Launch starts the sandbox's container with its entry point waiting
// for its input, and returns once the input holder is in place (the
// entry point has been started). The container lives until Call's run
// ends, Close, or ctx ends (which kills it). The wall-clock limit does
// not run yet: it starts with Call.
func (s *Sandbox) Launch(ctx context.Context) (retErr error) {
	if !s.warm || s.launched {
		return errors.New("sandbox: not a prepared warm sandbox")
	}
	s.launched = true
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", s.id, err)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return fmt.Errorf("sandbox %s: %w", s.id, err)
	}
	defer readyR.Close()
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		readyW.Close()
		return fmt.Errorf("sandbox %s: %w", s.id, err)
	}
	s.stdinW, s.ctlW = stdinW, ctlW
	s.startedCh = make(chan struct{})
	s.exited = make(chan error, 1)
	s.runCtx, s.cancel = context.WithCancelCause(ctx)
	s.ran = true
	// Once the container has its copies, ours of its ends go: the
	// holder's exit must end the ready pipe, and an entry point gone must
	// leave the input pipe without a reader (EntryEnded, EPIPE).
	s.ours = []*os.File{stdinR, readyW, ctlR}
	go func() {
		s.run(stdinR, []*os.File{stdinW, readyW, ctlR})
		stdinR.Close()
		readyW.Close()
		ctlR.Close()
	}()
	ready := make(chan error, 1)
	go func() {
		var b [1]byte
		n, err := readyR.Read(b[:])
		if n == 1 {
			err = nil
		} else if err == nil || errors.Is(err, io.EOF) {
			err = errors.New("the input holder ended before it was ready")
		}
		ready <- err
	}()
	select {
	case err = <-ready:
		if err == nil {
			select { // Started has run or the run ended
			case <-s.startedCh:
			case <-s.done:
				err = errors.New("the container ended before its input")
			}
		}
	case <-s.done:
		err = s.runErr
		if err == nil {
			err = fmt.Errorf("exited with status %d before its input", s.status)
		}
	}
	if err != nil {
		s.cancel(err)
		<-s.done
		return fmt.Errorf("launch sandbox of skill %q: %w (stderr: %q)", s.sk.Name, err, tail(s.stderr.Bytes()))
	}
	return nil
}

// Call sends input (a JSON object, checked against the skill's schema)
// to a launched sandbox's entry point and returns the result. The
// wall-clock limit counts from now, and so do the result's wall time
// (usage.wall_ms); CPU time and peak memory include the entry point's
// start. ctx ending kills the sandbox (StoppedReason "signal",
// "interrupted: ..."). Call answers once the entry point has exited;
// the container's deletion may still be going on (Close waits for it).
func (s *Sandbox) Call(ctx context.Context, input []byte) (*Result, error) {
	if !s.launched || s.called {
		return nil, errors.New("sandbox: not launched, or already called")
	}
	s.called = true
	if _, err := s.sk.ValidateInput(input); err != nil {
		return nil, &InputError{Err: err}
	}
	if len(trimSpace(input)) == 0 {
		input = []byte("{}")
	}
	select {
	case <-s.done:
		return nil, fmt.Errorf("run skill %q: %w (status %d, %v)", s.sk.Name, ErrSandboxEnded, s.status, s.runErr)
	default:
	}
	s.start = time.Now()
	stop := s.startTimeout()
	defer stop()
	stopCtx := context.AfterFunc(ctx, func() { s.cancel(context.Cause(ctx)) })
	defer stopCtx()
	// The write may block (a large input, an entry point that does not
	// read): it ends with EPIPE once the container is gone.
	s.wrote = make(chan struct{})
	go func() {
		defer close(s.wrote)
		defer s.ctlW.Close() // without "e": the holder kills the sandbox
		if s.when == EntryAtCall {
			if _, err := s.ctlW.Write([]byte("g\n")); err != nil {
				return
			}
		}
		// A failed write met an entry point that is gone (EPIPE): the
		// holder is told all the same, to report its status.
		_, _ = s.stdinW.Write(input)
		s.stdinW.Close()
		_, _ = s.ctlW.Write([]byte("e\n"))
	}()
	// Answer as soon as the process exited: the container's deletion
	// (cgroups, state: milliseconds) goes on meanwhile; Close waits for
	// it. With an egress server, its report comes after the run.
	var wall time.Duration
	select {
	case werr := <-s.exited:
		wall = time.Since(s.start)
		if s.eg != nil {
			<-s.done
			break
		}
		select {
		case <-s.wrote:
		case <-s.done:
			<-s.wrote
		}
		return s.result(ctx, wall, s.info.Status, werr)
	case <-s.done:
		wall = time.Since(s.start)
	}
	<-s.wrote // EPIPE at the latest: the container and our read end are gone
	return s.result(ctx, wall, s.status, s.runErr)
}

// startTimeout starts the wall-clock limit; the returned func stops it.
func (s *Sandbox) startTimeout() func() bool {
	t := time.AfterFunc(s.policy.Timeout, func() { s.cancel(errTimeout) })
	return t.Stop
}

// run runs the container to its end and closes done.
func (s *Sandbox) run(stdin io.Reader, extra []*os.File) {
	defer close(s.done)
	over := func() { s.cancel(errOutputLimit) }
	s.stdout = &capWriter{limit: s.policy.Output, over: over}
	s.stderr = &capWriter{limit: s.policy.Output, over: over}
	// config.json is for people and tools that look at a running skill;
	// the runtime gets the spec in memory. Encoding it (cold reflection,
	// ~0.8 ms of CPU) starts once the skill's program runs: alongside the
	// container's start it took a core from the init on a 2-core machine
	// (0.9-2.8 ms later exec measured). It is written before the bundle
	// folder is removed; a container that never started needs none.
	started := func(pid int) {
		if s.warm {
			for _, f := range s.ours {
				f.Close()
			}
			close(s.startedCh)
		}
		s.cfgErr = make(chan error, 1)
		go func(done chan<- error) { done <- spec.WriteConfig(s.dir, s.sp) }(s.cfgErr)
	}
	var exited func(error)
	if s.warm {
		exited = func(err error) { s.exited <- err }
	}
	if s.start.IsZero() {
		s.start = time.Now()
	}
	s.status, s.runErr = s.rt.Run(s.runCtx, s.id, runtime.RunOpts{
		CreateOpts: runtime.CreateOpts{
			Bundle:     s.dir,
			Spec:       s.sp,
			Stdio:      runtime.Stdio{Stdin: stdin, Stdout: s.stdout, Stderr: s.stderr},
			ExtraFiles: extra,

			EgressSocket: s.egressSock,
		},
		Exit:    &s.info,
		Started: started,
		Exited:  exited,
	})
	if s.eg != nil {
		s.network = s.eg.stop()
		s.eg = nil
	}
	if s.runErr != nil {
		// Belt and braces: Run deletes the container, but a failure
		// half-way may leave state behind.
		_ = s.rt.Delete(context.Background(), s.id, true)
	}
}

// waitConfig waits for config.json's writing, if it started.
func (s *Sandbox) waitConfig() error {
	if s.cfgErr == nil {
		return nil
	}
	err := <-s.cfgErr
	s.cfgErr = nil
	return err
}

// result builds the Result of the ended run from the runtime's status
// and error; ctx is the call's.
func (s *Sandbox) result(ctx context.Context, wall time.Duration, status int, runErr error) (*Result, error) {
	res := s.base
	res.Warnings = append([]string(nil), s.base.Warnings...)
	res.Network = s.network
	policy, info := s.policy, &s.info
	cause := context.Cause(s.runCtx)
	interrupted := false
	if runErr != nil {
		switch {
		case errors.Is(cause, errTimeout), errors.Is(cause, errOutputLimit):
			// We stopped it; reported below.
		case ctx.Err() != nil:
			interrupted = true
		default:
			return nil, fmt.Errorf("run skill %q: %w", s.sk.Name, runErr)
		}
	}
	if err := s.waitConfig(); err != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("bundle config.json not written: %v", err))
	}
	if info.Status == 0 && status != 0 {
		info.Status = status
	}
	if s.warm && info.Signal == 0 && info.Status > 128 && info.Status < 128+65 {
		// The holder reports a signal death of the entry point as
		// 128+N, as a shell does.
		info.Signal = unix.Signal(info.Status - 128)
	}
	if s.warm {
		info.Wall = wall
	}
	res.ExitCode = info.Status
	res.Output = parseOutput(s.stdout.Bytes())
	res.Stderr = tail(s.stderr.Bytes())
	fillUsage(&res, info, wall)
	fillLimits(&res, policy, info)
	switch {
	case interrupted:
		res.StoppedReason = StoppedSignal
		res.Error = "interrupted: " + context.Cause(ctx).Error()
	case errors.Is(cause, errTimeout):
		res.StoppedReason = StoppedTimeout
		res.Error = fmt.Sprintf("killed after the %s wall-clock limit", policy.Timeout)
	case errors.Is(cause, errOutputLimit):
		res.StoppedReason = StoppedOutputLimit
		res.Error = fmt.Sprintf("killed: wrote more than the %d-byte output limit", policy.Output)
	case info.OOMKilled:
		res.StoppedReason = StoppedMemory
		res.Error = fmt.Sprintf("killed: out of memory (limit %d bytes)", policy.Memory)
	case info.Status != 0 && enforcedBy(&res, "memory") != "" && enforcedBy(&res, "memory") != spec.EnforcedByCgroup && looksLikeMemoryLimit(s.stderr.Bytes()):
		res.StoppedReason = StoppedMemory
		res.Error = fmt.Sprintf("failed to allocate memory: the %d-byte per-process limit (%s) was reached", policy.Memory, enforcedBy(&res, "memory"))
	case info.Status != 0 && enforcedBy(&res, "pids") != "" && looksLikePidsLimit(s.stderr.Bytes()):
		res.StoppedReason = StoppedPids
		res.Error = fmt.Sprintf("failed to create a process or thread: task limit %d reached", policy.Pids)
		if by := enforcedBy(&res, "memory"); by != "" && by != spec.EnforcedByCgroup {
			// EAGAIN from pthread_create is also a thread stack that did
			// not fit under the per-process address-space limit.
			res.Error = fmt.Sprintf("failed to create a process or thread: task limit %d or the %d-byte per-process memory limit (%s; each thread reserves a stack) reached", policy.Pids, policy.Memory, by)
		}
	case cpuTimeStop(policy, info):
		res.StoppedReason = StoppedCPUTime
		res.Error = fmt.Sprintf("killed: a process used the %d s CPU-time backstop (RLIMIT_CPU)", policy.Fallback.CPUTimeSeconds)
	case info.Signal != 0:
		res.StoppedReason = StoppedSignal
		res.Error = fmt.Sprintf("killed by signal %d (%s)", int(info.Signal), info.Signal)
	}
	res.OK = res.StoppedReason == "" && res.ExitCode == 0
	return &res, nil
}

// Close destroys the sandbox: a container still running is killed and
// removed, then the egress server, the bundle folder and its claim and
// the dependency environment are released. It returns once all is gone.
func (s *Sandbox) Close() {
	s.closeOnce.Do(func() {
		if s.cancel != nil {
			s.cancel(errClosed)
			if s.ran {
				<-s.done
			}
		}
		if s.wrote != nil {
			<-s.wrote
		}
		s.cleanup()
	})
}

var errClosed = errors.New("sandbox closed")

// cleanup releases what prepare acquired, in reverse order.
func (s *Sandbox) cleanup() {
	_ = s.waitConfig()
	if s.ctlW != nil {
		s.ctlW.Close()
	}
	if s.stdinW != nil {
		s.stdinW.Close()
	}
	if s.eg != nil {
		s.eg.stop()
		s.eg = nil
	}
	if s.claim != nil {
		s.claim.release()
		s.claim = nil
	}
	if s.releaseDeps != nil {
		s.releaseDeps()
		s.releaseDeps = nil
	}
}
