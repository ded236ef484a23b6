package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/spec"
)

// StderrTail is how many bytes of stderr the Result keeps (the end).
const StderrTail = 4096

var (
	errTimeout     = errors.New("wall-clock timeout")
	errOutputLimit = errors.New("output limit exceeded")
	errClosed      = errors.New("sandbox closed")
)

// container is what a cold run and a warm sandbox share: one container
// carrying out a plan, from its claimed bundle folder and egress server to
// the run to its end and what it left (status, usage, network report).
// The cold path (Run) and the warm one (Sandbox) differ only in how the
// input reaches the entry point and when the clock starts.
type container struct {
	rt   runtime.Runtime
	plan *plan
	// warm: the entry point runs under the input holder (see Sandbox).
	warm bool

	id, dir    string
	sp         *specs.Spec
	claim      *owned
	guard      runtime.Guard // nil: the back end has no lifetime guard
	eg         *egressRun
	egressSock string
	base       Result // Skill, Environment, Warnings

	runCtx context.Context
	cancel context.CancelCauseFunc
	stdout *capWriter
	stderr *capWriter
	start  time.Time // launch (cold) or input write (warm)
	// onStarted and onExited, when set, are called when the container's
	// process runs the configured program and once it has been waited for.
	onStarted func()
	onExited  func(error)
	// holder is set when an input holder reports the entry point's exit
	// status (a warm sandbox): the back end may then offer report.
	holder bool
	// report, once the back end offers it (runtime.RunOpts.Report) and
	// there is no egress server, takes the entry point's status as the
	// holder reports it: the call answers from it, before the container's
	// end.
	report atomic.Pointer[func(status int)]

	// Filled by run before done is closed.
	done    chan struct{}
	ran     bool // run was started (done will close)
	status  int
	runErr  error
	info    runtime.ExitInfo
	network *Network
	cfgErr  chan error
}

// newContainer plans running sk with argv under opts and makes the
// container's bundle and egress server. A policy refusal is returned as
// a Result (StoppedReason "policy"), with nothing left to release.
func newContainer(ctx context.Context, rt runtime.Runtime, sk *spec.Skill, argv []string, opts Options, warm bool) (_ *container, _ *Result, retErr error) {
	tmp := opts.TempDir
	if tmp == "" {
		tmp = DefaultTempDir()
	}
	id := opts.ID
	if id == "" {
		id = newID(sk.Name)
	}
	dir, err := bundleName(tmp, sk.Name)
	if err != nil {
		return nil, nil, err
	}
	// The sandbox never outlives this process: registered with the back
	// end's lifetime guard before anything of it exists, the container
	// and its bundle folder are removed by the guard if this process dies
	// before cleanup (SIGKILL, OOM kill, crash). The guard's process
	// starts in the background while the plan is made.
	var guard runtime.Guard
	if gd, ok := rt.(runtime.Guarder); ok {
		if guard, err = gd.Guard(id, runtime.GuardOpts{Lock: dir + ownerSuffix, Remove: []string{dir}}); err != nil {
			return nil, nil, &SkillError{sk.Name, err}
		}
	}
	release := func() {
		if guard != nil {
			guard.Release()
		}
	}
	cgroups, _ := rt.(runtime.CgroupProber)
	p, err := newPlan(ctx, sk, argv, opts, cgroups)
	if pe := (*spec.PolicyError)(nil); errors.As(err, &pe) {
		release()
		return nil, refusal(sk, p.envInfo, nil, pe.Error()), nil
	}
	if err != nil {
		release()
		return nil, nil, err
	}
	c := &container{rt: rt, plan: p, warm: warm, done: make(chan struct{}), id: id, guard: guard}
	c.base = Result{Skill: sk.Name, ExitCode: -1, Environment: p.envInfo}
	if p.exec != nil {
		c.base.Command, c.base.Cwd = p.exec.Args, p.policy.Cwd
		if p.note != "" {
			c.base.Notes = []string{p.note}
		}
	}
	defer func() {
		if retErr != nil {
			c.cleanup()
		}
	}()
	for _, w := range p.policy.Warnings {
		c.base.Warnings = append(c.base.Warnings, w)
		if opts.Warn != nil {
			opts.Warn(w)
		}
	}
	if p.policy.Network == spec.NetworkAllowlist && p.platform != "linux" {
		c.cleanup()
		return nil, refusal(sk, p.envInfo, c.base.Warnings, "network: per-host allowlists need Linux network namespaces"), nil
	}
	collectStale(ctx, rt, tmp)
	// Nothing of the sandbox is made before its guard is in place.
	if c.guard != nil {
		if err := c.guard.Ready(); err != nil {
			return nil, nil, &SkillError{sk.Name, err}
		}
	}
	if c.claim, err = claimBundleDir(dir, c.id); err != nil {
		return nil, nil, err
	}
	c.dir = c.claim.dir
	var devDir string
	if p.platform == "linux" {
		devDir = devDirOf(rt)
	}
	if c.sp, err = p.writeBundle(c.dir, devDir, false); err != nil {
		return nil, nil, err
	}
	if warm {
		if p.platform != "linux" {
			return nil, nil, &SkillError{sk.Name, errors.New("warm sandboxes need Linux")}
		}
		pr := *c.sp.Process // Prepare puts the input holder in front
		c.sp.Process = &pr
	}
	if p.policy.Network == spec.NetworkAllowlist {
		if c.eg, err = startEgress(c.dir, p.policy); err != nil {
			return nil, nil, err
		}
		c.egressSock = c.eg.handoff.Path()
	}
	return c, nil, nil
}

// guardGrace is how long after the wall-clock limit the lifetime guard
// kills a sandbox this process has not killed (stuck, stopped): the
// guard is the backstop, this process' own timer the limit.
const guardGrace = 250 * time.Millisecond

// startTimeout starts the wall-clock limit, counted from c.start, here
// and as the lifetime guard's deadline; the returned func stops this
// process' timer (the guard's deadline goes with the guard's release).
func (c *container) startTimeout() (func() bool, error) {
	if err := c.guardDeadline(); err != nil {
		return nil, err
	}
	return c.startTimer(), nil
}

// guardDeadline sets the lifetime guard's deadline: the wall-clock limit,
// counted from c.start, and guardGrace.
func (c *container) guardDeadline() error {
	if c.guard == nil {
		return nil
	}
	if err := c.guard.SetDeadline(c.start.Add(c.plan.policy.Timeout + guardGrace)); err != nil {
		return &SkillError{c.plan.sk.Name, fmt.Errorf("lifetime guard: %w", err)}
	}
	return nil
}

// startTimer starts this process' wall-clock limit, counted from c.start,
// and returns what stops it.
func (c *container) startTimer() func() bool {
	t := time.AfterFunc(c.plan.policy.Timeout-time.Since(c.start), func() { c.cancel(errTimeout) })
	return t.Stop
}

// offerReport is RunOpts.Report for a sandbox with an input holder. With
// an egress server the answer waits for the run's end (its report comes
// after it): the offer is declined, and the holder does not wait for
// Close.
func (c *container) offerReport() func(func(int)) {
	if !c.holder {
		return nil
	}
	return func(report func(int)) {
		if c.eg == nil {
			c.report.Store(&report)
		}
	}
}

// run runs the container to its end and closes done.
func (c *container) run(stdin io.Reader, extra []*os.File) {
	defer close(c.done)
	policy := c.plan.policy
	over := func() { c.cancel(errOutputLimit) }
	c.stdout = &capWriter{limit: policy.Output, over: over}
	c.stderr = &capWriter{limit: policy.Output, over: over}
	if e := c.plan.opts.Exec; e != nil {
		c.stdout.live, c.stderr.live = e.Stdout, e.Stderr
	}
	// config.json is for people and tools that look at a running skill;
	// the runtime gets the spec in memory. Encoding it (cold reflection,
	// ~0.8 ms of CPU) starts once the skill's program runs: alongside the
	// container's start it took a core from the init on a 2-core machine
	// (0.9-2.8 ms later exec measured). It is written before the bundle
	// folder is removed; a container that never started needs none.
	started := func(int) {
		if c.onStarted != nil {
			c.onStarted()
		}
		c.cfgErr = make(chan error, 1)
		go func(done chan<- error) { done <- spec.WriteConfig(c.dir, c.sp) }(c.cfgErr)
	}
	if c.start.IsZero() {
		c.start = time.Now()
	}
	c.status, c.runErr = c.rt.Run(c.runCtx, c.id, runtime.RunOpts{
		CreateOpts: runtime.CreateOpts{
			Bundle:     c.dir,
			Spec:       c.sp,
			Stdio:      runtime.Stdio{Stdin: stdin, Stdout: c.stdout, Stderr: c.stderr},
			ExtraFiles: extra,

			EgressSocket: c.egressSock,
		},
		Exit:    &c.info,
		Started: started,
		Exited:  c.onExited,
		Report:  c.offerReport(),
	})
	if c.eg != nil {
		c.network = c.eg.stop()
		c.eg = nil
	}
	if c.runErr != nil {
		// Belt and braces: Run deletes the container, but a failure
		// half-way may leave state behind.
		_ = c.rt.Delete(context.Background(), c.id, true)
	}
}

// waitConfig waits for config.json's writing, if it started.
func (c *container) waitConfig() error {
	if c.cfgErr == nil {
		return nil
	}
	err := <-c.cfgErr
	c.cfgErr = nil
	return err
}

// stop kills the container if it still runs and waits for its run's end.
func (c *container) stop() {
	if c.cancel != nil {
		c.cancel(errClosed)
		if c.ran {
			<-c.done
		}
	}
}

// cleanup releases what newContainer acquired, in reverse order: the
// egress server, the bundle folder and its claim, the plan's dependency
// environment.
func (c *container) cleanup() {
	_ = c.waitConfig()
	if c.eg != nil {
		c.eg.stop()
		c.eg = nil
	}
	if c.claim != nil {
		c.claim.release()
		c.claim = nil
	}
	if c.guard != nil {
		c.guard.Release()
		c.guard = nil
	}
	c.plan.release()
}

// newID returns "skill-NAME-RANDOM", a valid container ID.
func newID(name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "skill-" + name + "-" + hex.EncodeToString(b[:])
}

// capWriter keeps what is written up to limit bytes, and passes the same
// bytes on to live when set; the first write past the limit calls over
// (which cancels the run). Writes never fail, so the runtime's copier does
// not see EPIPE (a failing live writer is dropped).
type capWriter struct {
	mu    sync.Mutex
	buf   []byte
	limit int64
	n     int64
	over  func()
	fired bool
	live  io.Writer
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n += int64(len(p))
	if room := w.limit - int64(len(w.buf)); room > 0 {
		kept := p
		if int64(len(p)) > room {
			kept = p[:room]
		}
		w.buf = append(w.buf, kept...)
		if w.live != nil {
			if _, err := w.live.Write(kept); err != nil {
				w.live = nil
			}
		}
	}
	if w.n > w.limit && !w.fired {
		w.fired = true
		w.over()
	}
	return len(p), nil
}

// Bytes returns what was kept.
func (w *capWriter) Bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf
}

// tail returns the last StderrTail bytes, cut at a rune boundary.
func tail(b []byte) string {
	if len(b) > StderrTail {
		b = b[len(b)-StderrTail:]
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
