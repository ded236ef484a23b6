package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/runner/holder"
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
// A launched sandbox runs its entry point under an input holder, the
// container's first process: this binary's own (runner/holder, C, run
// before the Go runtime starts) when the back end's containers can run
// this binary, else a /bin/sh script (holderScript). It holds a second copy
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
	c *container
	// cmdPrefix is what goes in front of an EntryCommand sandbox's
	// command (the rlimit wrapper, the exec shell).
	cmdPrefix []string

	when      StartEntry
	exited    chan error // the wait's error, once the process exited
	ours      []*os.File // our copies of the container's ends, closed once it started
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
	// EntryCommand: the sandbox waits for a command (CallCommand), not
	// for the skill's entry point: a warm `skill exec`.
	EntryCommand
)

// The input holder as a shell script (see Sandbox; runner/holder is the
// same in C, and the tests hold both to one protocol). $1 is "launch",
// "call" or "cmd" (the control pipe's first line is then the working directory and the command
// line, shell-quoted by CallCommand: they replace the holder's own "$@"). fd 3 is its
// copy of the stdin pipe's write end, fd 4 tells the launcher it is in
// place ("r") and, at the end, the entry point's status ("xN" and a
// newline, after the holder closed its own stdout and stderr: the
// launcher may answer from it before the container is torn down), fd 5
// is the control pipe ("g": start the entry point, "e": the input is
// complete). The entry point gets the pipe as stdin (kept on fd 6: a
// non-interactive shell gives background commands /dev/null) and none of
// the holder's descriptors; the holder keeps no reading end, so the
// writer sees EPIPE once the entry point is gone. SIGPIPE is ignored by
// the holder only after the entry point started (a launcher gone must not
// kill it before it exits). Once the entry point has exited, the holder
// SIGKILLs what it left running (it is the pid namespace's init), reports
// the status and waits for the control pipe's end (Close) before it exits
// with it (128+N when a signal N killed it): the container's teardown
// (the init's exit, its namespaces, its cgroups) comes after the answer,
// not between the report and the client reading the answer (0.3-0.4 ms
// of a warm call's p50 on two cores, hack/mcpbench's trace).
const (
	holderShell  = "/bin/sh"
	holderScript = `exec 6<&0 0</dev/null
m=$1; shift
if [ "$m" = call ]; then printf r >&4; IFS= read -r g <&5 || exit 125; fi
if [ "$m" = cmd ]; then printf r >&4; IFS= read -r g <&5 || exit 125; eval "set -- $g"; cd "$1" || exit 126; shift; fi
"$@" <&6 6<&- 5<&- 4>&- 3>&- &
p=$!
trap '' PIPE
exec 6<&-
[ "$m" = call ] || [ "$m" = cmd ] || printf r >&4
if IFS= read -r e <&5 && [ "$e" = e ]; then exec 3>&-; else kill -KILL -1 2>/dev/null; exit 125; fi
while :; do wait "$p"; s=$?; kill -0 "$p" 2>/dev/null || { kill -KILL -1 2>/dev/null; exec 1>&- 2>&-; printf 'x%d\n' "$s" >&4; exec 4>&-; IFS= read -r e <&5; exit "$s"; }; done`
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
//
// With EntryCommand the sandbox is a skill exec's (opts.Exec gives the
// working directory and stdin is the call's; its Args are ignored): it
// waits for the command CallCommand sends.
func Prepare(ctx context.Context, rt runtime.Runtime, sk *spec.Skill, opts Options, when StartEntry) (*Sandbox, *Result, error) {
	switch {
	case when == EntryCommand || when == EntryPython:
		x := Exec{}
		if opts.Exec != nil {
			x = *opts.Exec
		}
		x.Args = []string{commandPlaceholder}
		if when == EntryPython {
			x.Args = []string{"python3", "-c", pythonZygote}
		}
		opts.Exec = &x
	case sk.Input.Mode == spec.InputArgv || opts.Command != nil || opts.Exec != nil || !sk.HasEntry():
		return nil, nil, &SkillError{sk.Name, ErrArgvInput}
	}
	c, res, err := newContainer(ctx, rt, sk, nil, opts, true)
	if c == nil {
		return nil, res, err
	}
	sb := &Sandbox{c: c, when: when}
	mode := "launch"
	switch when {
	case EntryAtCall:
		mode = "call"
	case EntryPython:
		mode = "launch" // the zygote starts with the sandbox
	case EntryCommand:
		mode = "cmd"
		// The command line before the placeholder: the rlimit wrapper
		// and the exec shell, kept in front of every command.
		sb.cmdPrefix = c.sp.Process.Args[:len(c.sp.Process.Args)-1]
	}
	c.sp.Process.Args = holderArgs(rt, mode, c.sp.Process.Args)
	return sb, nil, nil
}

// holderArgs is the command line of a sandbox's input holder in mode
// with entry as its entry point: the binary's own (runner/holder) when
// the back end's containers can run this binary and it was built with
// it, else the shell's (holderScript).
func holderArgs(rt runtime.Runtime, mode string, entry []string) []string {
	if se, ok := rt.(runtime.SelfExecer); ok && holder.Linked() {
		return holder.Args(se.SelfExe(), mode, entry...)
	}
	return append([]string{holderShell, "-c", holderScript, holder.Arg, mode}, entry...)
}

// commandPlaceholder stands for the command of an EntryCommand sandbox
// in its spec (the holder replaces it). A path, so that the plan never
// finds it on PATH and execs it directly (spec.Exec.Direct): the exec
// shell stays in front of every command the sandbox runs, which reports
// one that is missing (127) or not executable (126) as a cold run does.
const commandPlaceholder = "/.skillrun-command"

// ErrNotWarm is returned by CallCommand for a command it cannot send to
// a waiting sandbox (a newline in an argument): run it cold.
var ErrNotWarm = errors.New("the command cannot be sent to a warm sandbox")

// CallCommand runs e (its Args, in its Cwd or the sandbox's default) in
// a sandbox prepared with EntryCommand and launched, with stdin as its
// input, as Run with opts.Exec would: scripts resolved in the skill,
// the same result. See Call for the clock, ctx and the answer.
func (s *Sandbox) CallCommand(ctx context.Context, e spec.Exec, stdin []byte) (*Result, error) {
	c := s.c
	if s.when != EntryCommand {
		return nil, errors.New("sandbox: not prepared for commands")
	}
	if len(e.Args) == 0 {
		return nil, &InputError{Err: errors.New("command: empty")}
	}
	args, note := resolveScript(c.plan.sk, c.plan.policy.Workspace, e)
	cwd := e.Cwd
	if cwd == "" {
		cwd = c.plan.policy.Cwd
	} else if err := spec.CheckExecCwd(c.plan.sk, c.plan.policy, cwd); err != nil {
		return nil, &InputError{Err: err}
	}
	words := append(append([]string{cwd}, s.cmdPrefix...), args...)
	for _, w := range words {
		if strings.ContainsAny(w, "\n\x00") {
			return nil, ErrNotWarm
		}
	}
	c.plan.exec = &spec.Exec{Args: args, Cwd: cwd}
	c.base.Command, c.base.Cwd, c.base.Notes = args, cwd, nil
	if note != "" {
		c.base.Notes = []string{note}
	}
	return s.call(ctx, []byte(shellQuote(words)+"\n"), stdin)
}

// shellQuote quotes words for the holder's eval: each in single quotes.
func shellQuote(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
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
func (s *Sandbox) ID() string { return s.c.id }

// Networked reports whether the sandbox has an egress server (a network
// allowlist): its calls' traffic is relayed by this process.
func (s *Sandbox) Networked() bool { return s.c.eg != nil }

// Launch starts the sandbox's container with its entry point waiting
// for its input, and returns once the input holder is in place (the
// entry point has been started). The container lives until Call's run
// ends, Close, or ctx ends (which kills it). The wall-clock limit does
// not run yet: it starts with Call.
func (s *Sandbox) Launch(ctx context.Context) (retErr error) {
	c := s.c
	if s.launched {
		return errors.New("sandbox: not a prepared warm sandbox")
	}
	s.launched = true
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", c.id, err)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return fmt.Errorf("sandbox %s: %w", c.id, err)
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		readyR.Close()
		readyW.Close()
		return fmt.Errorf("sandbox %s: %w", c.id, err)
	}
	s.stdinW, s.ctlW = stdinW, ctlW
	s.startedCh = make(chan struct{})
	s.exited = make(chan error, 1)
	c.onStarted = func() {
		for _, f := range s.ours {
			f.Close()
		}
		close(s.startedCh)
	}
	c.onExited = func(err error) { s.exited <- err }
	// The entry point's status, as the holder reports it (a normal exit
	// only: a signal's death is left to the container's end, which says
	// more): the back end may answer from it before the teardown.
	c.holder = true
	c.runCtx, c.cancel = context.WithCancelCause(ctx)
	c.ran = true
	// Once the container has its copies, ours of its ends go: the
	// holder's exit must end the ready pipe, and an entry point gone must
	// leave the input pipe without a reader (EntryEnded, EPIPE).
	s.ours = []*os.File{stdinR, readyW, ctlR}
	go func() {
		c.run(stdinR, []*os.File{stdinW, readyW, ctlR})
		stdinR.Close()
		readyW.Close()
		ctlR.Close()
	}()
	ready := make(chan error, 1)
	go func() {
		defer readyR.Close()
		br := bufio.NewReaderSize(readyR, 64)
		b, err := br.ReadByte()
		if err == nil && b != 'r' {
			err = fmt.Errorf("the input holder said %q, not ready", b)
		} else if errors.Is(err, io.EOF) {
			err = errors.New("the input holder ended before it was ready")
		}
		ready <- err
		if err != nil {
			return
		}
		// Then, at its end, the entry point's status (or nothing: killed,
		// or the holder's own error).
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "x") {
			return
		}
		// A normal exit is answered from the report when the back end
		// offered to, and the holder waits for the control pipe's end
		// until Close. Otherwise (a death by a signal, 128+N, which the
		// container's end says more of; no offer) the pipe ends now: the
		// holder exits, and the answer waits for the container's first
		// process, the holder, to be reaped.
		report := c.report.Load()
		if n, err := strconv.Atoi(strings.TrimSuffix(line[1:], "\n")); err == nil && n >= 0 && n < 128 && report != nil {
			(*report)(n)
		} else {
			_ = ctlW.Close()
		}
	}()
	select {
	case err = <-ready:
		if err == nil {
			select { // Started has run or the run ended
			case <-s.startedCh:
			case <-c.done:
				err = errors.New("the container ended before its input")
			}
		}
	case <-c.done:
		err = c.runErr
		if err == nil {
			err = fmt.Errorf("exited with status %d before its input", c.status)
		}
	}
	if err != nil {
		c.cancel(err)
		<-c.done
		return fmt.Errorf("launch sandbox of skill %q: %w (stderr: %q)", c.plan.sk.Name, err, tail(c.stderr.Bytes()))
	}
	return nil
}

// Call sends in (made by NewInput for the sandbox's skill) to a launched
// sandbox's entry point and returns the result. The
// wall-clock limit counts from now, and so do the result's wall time
// (usage.wall_ms); CPU time and peak memory include the entry point's
// start. ctx ending kills the sandbox (StoppedReason "signal",
// "interrupted: ..."). Call answers once the entry point has exited;
// the container's deletion may still be going on (Close waits for it).
func (s *Sandbox) Call(ctx context.Context, in *Input) (*Result, error) {
	if s.when == EntryCommand || s.when == EntryPython {
		return nil, errors.New("sandbox: prepared for commands (CallCommand)")
	}
	return s.call(ctx, first(s.when), in.data)
}

// first is the control pipe's first line in mode when (nil: none).
func first(when StartEntry) []byte {
	if when == EntryAtCall {
		return []byte("g\n")
	}
	return nil
}

// pipeAtomic is the least a pipe holds (one page; Linux's pipes are 16
// pages unless the user's pipe buffer quota is spent).
const pipeAtomic = 4096

// call starts the waiting entry point or command (the control line
// first, when set), writes its input and returns its result.
func (s *Sandbox) call(ctx context.Context, first, input []byte) (*Result, error) {
	c := s.c
	if !s.launched || s.called {
		return nil, errors.New("sandbox: not launched, or already called")
	}
	s.called = true
	select {
	case <-c.done:
		return nil, fmt.Errorf("run skill %q: %w (status %d, %v)", c.plan.sk.Name, ErrSandboxEnded, c.status, c.runErr)
	default:
	}
	c.start = time.Now()
	defer c.startTimer()()
	stopCtx := context.AfterFunc(ctx, func() { c.cancel(context.Cause(ctx)) })
	defer stopCtx()
	s.wrote = make(chan struct{})
	write := func() {
		defer close(s.wrote)
		if first != nil {
			if _, err := s.ctlW.Write(first); err != nil {
				return
			}
		}
		// A failed write met an entry point that is gone (EPIPE): the
		// holder is told all the same, to report its status.
		_, _ = s.stdinW.Write(input)
		s.stdinW.Close()
		_, _ = s.ctlW.Write([]byte("e\n"))
	}
	if len(input) <= pipeAtomic && len(first)+2 <= pipeAtomic {
		// Nothing was written to either pipe before: a write this small
		// fits whatever the pipe's size, and never blocks.
		write()
	} else {
		// It may block (a large input, an entry point that does not
		// read): it ends with EPIPE once the container is gone.
		go write()
	}
	// The lifetime guard's deadline once the input is on its way: it is
	// the backstop of this process' timer (set above). The guard reads
	// it only when its timer fires (runtime/linux's guard), but the
	// message still costs this process a write and the timer's setting.
	if err := c.guardDeadline(); err != nil {
		c.cancel(err)
		<-c.done
		<-s.wrote
		return nil, err
	}
	// Answer as soon as the process exited: the container's deletion
	// (cgroups, state: milliseconds) goes on meanwhile; Close waits for
	// it. With an egress server, its report comes after the run.
	var wall time.Duration
	select {
	case werr := <-s.exited:
		wall = time.Since(c.start)
		if c.eg != nil {
			<-c.done
			break
		}
		select {
		case <-s.wrote:
		case <-c.done:
			<-s.wrote
		}
		return c.outcome(ctx, wall, c.info.Status, werr)
	case <-c.done:
		wall = time.Since(c.start)
	}
	<-s.wrote // EPIPE at the latest: the container and our read end are gone
	return c.outcome(ctx, wall, c.status, c.runErr)
}

// Close destroys the sandbox: a container still running is killed and
// removed, then the egress server, the bundle folder and its claim and
// the dependency environment are released. It returns once all is gone.
func (s *Sandbox) Close() {
	s.closeOnce.Do(func() {
		// The control pipe's end first: a holder that reported its entry
		// point's status waits for it to exit (and one still waiting for
		// "e" kills the sandbox).
		if s.ctlW != nil {
			s.ctlW.Close()
		}
		s.c.stop()
		if s.wrote != nil {
			<-s.wrote
		}
		if s.stdinW != nil {
			s.stdinW.Close()
		}
		s.c.cleanup()
	})
}
