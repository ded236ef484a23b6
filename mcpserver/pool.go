package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/spec"
)

// DefaultPoolMaxAge is how long a warm sandbox waits for a call before
// it is recycled, when Options.PoolMaxAge is 0.
const DefaultPoolMaxAge = 10 * time.Minute

// pool keeps up to size launched sandboxes of one skill (runner.Sandbox:
// entry point started, waiting for its input). A call takes one or, when
// none is ready, runs cold: a flood of calls degrades to cold runs and
// never waits for the pool. One goroutine refills the pool one sandbox at
// a time and recycles sandboxes older than maxAge. A sandbox serves one
// call and is destroyed. close kills every sandbox and waits.
type pool struct {
	rt     runtime.Runtime
	sk     *spec.Skill
	opts   runner.Options
	size   int
	maxAge time.Duration
	warn   func(string)
	// retryFirst is the first wait after a failed launch (tests; 0: a
	// second).
	retryFirst time.Duration
	// work counts each launch as the server's busy work (nil: not).
	work *busy

	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{} // a member was taken: refill
	done   chan struct{} // the refill loop ended

	mu       sync.Mutex
	lastTake time.Time
	// lastEnd is when the last call of this skill was answered: the
	// refill waits answerGrace after it.
	lastEnd time.Time
	// inflight counts the calls of this skill being served (warm or
	// cold): the pool launches nothing while one runs, so a launch
	// (tens of ms of CPU) never competes with a call.
	inflight int
	when     runner.StartEntry // EntryAtCall once the skill showed it ignores its input
	ready    []*member
	closing  sync.WaitGroup // members taken and being destroyed
	stats    poolStats
}

// poolStats count what the pool did (tests, logs).
type poolStats struct {
	Launched, Warm, Cold, Recycled, Failed int
}

type member struct {
	sb     *runner.Sandbox
	born   time.Time
	cancel context.CancelFunc
	// relayed ends the busy work of a taken member whose traffic this
	// process relays (takeIfAny; nil otherwise).
	relayed func()
}

// destroy kills the member's container (if it still runs) and releases
// its bundle, egress server and dependency environment.
func (m *member) destroy() {
	m.cancel()
	m.sb.Close()
}

// newPool starts the refill loop of a pool for sk; work counts its
// launches (nil: nothing counts them).
func newPool(rt runtime.Runtime, sk *spec.Skill, opts runner.Options, size int, maxAge time.Duration, warn func(string), when runner.StartEntry, work *busy) *pool {
	return newPoolRetry(rt, sk, opts, size, maxAge, warn, when, work, 0)
}

// newPoolRetry is newPool with the first wait after a failed launch.
func newPoolRetry(rt runtime.Runtime, sk *spec.Skill, opts runner.Options, size int, maxAge time.Duration, warn func(string), when runner.StartEntry, work *busy, retryFirst time.Duration) *pool {
	if maxAge <= 0 {
		maxAge = DefaultPoolMaxAge
	}
	p := &pool{rt: rt, sk: sk, opts: opts, size: size, maxAge: maxAge, warn: warn, when: when, retryFirst: retryFirst, work: work,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	go p.refill()
	return p
}

// poolable reports whether sk's sandboxes can start before their input.
func poolable(sk *spec.Skill) bool { return sk.Input.Mode != spec.InputArgv }

// take returns a ready sandbox, or nil when none is (run cold); the
// caller hands it back to release once its call is over.
func (p *pool) take() *member {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		p.stats.Cold++
		return nil
	}
	for len(p.ready) > 0 {
		m := p.ready[0]
		p.ready = p.ready[1:]
		if time.Since(m.born) > p.maxAge {
			p.stats.Recycled++
			p.destroyLater(m)
			continue
		}
		p.checkEntry(m)
		p.lastTake = time.Now()
		p.stats.Warm++
		p.closing.Add(1) // released by release
		return m
	}
	p.stats.Cold++
	return nil
}

// takeIfAny is take on a pool that may be nil (no pool: nil). A member
// whose sandbox has a network allowlist counts as the server's busy work
// until release: this process relays its call's traffic.
func (p *pool) takeIfAny() *member {
	if p == nil {
		return nil
	}
	m := p.take()
	if m != nil && m.sb.Networked() {
		m.relayed = p.work.start()
	}
	return m
}

// checkEntry switches the pool to EntryAtCall when m's entry point ended
// before its call: the skill does not wait for its input, so starting it
// ahead runs it before any call (p.mu held).
func (p *pool) checkEntry(m *member) {
	if p.when == runner.EntryAtLaunch && m.sb.EntryEnded() {
		p.when = runner.EntryAtCall
		if p.warn != nil {
			p.warn(fmt.Sprintf("skill %q does not wait for its input: its warm sandboxes start it when the call comes from now on", p.sk.Name))
		}
	}
}

// begin and end bracket a call of the skill (warm or cold; nil-safe):
// the refill waits until no call runs, and end wakes it.
func (p *pool) begin() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.inflight++
	p.mu.Unlock()
}

// end runs before the answer is written (the call's handler defers it),
// and so does release: neither starts nor wakes a goroutine then. Each
// start or wake-up readies a goroutine, and Go wakes an idle thread (on
// a CPU idle since the last call: in a VM, an inter-processor
// interrupt) to run it while the answer is being encoded and written.
// The refill is woken by a timer instead, answerGrace later, when it
// would launch anyway.
func (p *pool) end() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.inflight--
	p.lastEnd = time.Now()
	p.mu.Unlock()
	time.AfterFunc(answerGrace, p.poke)
}

// poke wakes the refill loop.
func (p *pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// release ends a member's busy work, if any, once its call is over,
// and destroys it answerGrace after its answer, on a timer's goroutine
// (see end).
func (p *pool) release(m *member) {
	if m.relayed != nil {
		m.relayed()
	}
	time.AfterFunc(answerGrace, func() {
		defer p.closing.Done()
		m.destroy()
	})
}

// destroyLater destroys m on its own goroutine (p.mu held).
func (p *pool) destroyLater(m *member) {
	p.closing.Add(1)
	go func() {
		defer p.closing.Done()
		m.destroy()
	}()
}

// refill keeps the pool full until close, one launch at a time.
func (p *pool) refill() {
	defer close(p.done)
	backoff := time.Duration(0)
	failDelay, lastFailure := time.Duration(0), ""
	tick := time.NewTicker(p.maxAge / 4)
	defer tick.Stop()
	for {
		p.mu.Lock()
		// Recycle the members that waited too long.
		keep := p.ready[:0]
		for _, m := range p.ready {
			p.checkEntry(m)
			if time.Since(m.born) > p.maxAge {
				p.stats.Recycled++
				p.destroyLater(m)
				continue
			}
			keep = append(keep, m)
		}
		p.ready = keep
		need := len(p.ready) < p.size && p.inflight == 0
		// While calls keep taking sandboxes and some are left, a launch
		// (tens of ms of CPU) would compete with them: refill once the
		// calls pause, or when the pool is empty.
		var quiet time.Duration
		if need && len(p.ready) > 0 {
			quiet = refillQuiet - time.Since(p.lastTake)
		}
		if need {
			quiet = max(quiet, answerGrace-time.Since(p.lastEnd))
		}
		p.mu.Unlock()
		if quiet > 0 {
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(quiet):
			}
			continue
		}
		if need && backoff == 0 {
			if err := p.launch(); err != nil {
				if p.ctx.Err() != nil {
					return
				}
				if errors.Is(err, errRefused) {
					// Every call is refused (cold, nothing runs): the
					// grants are fixed, so no sandbox will ever launch.
					return
				}
				// A launch that keeps failing (a dependency build that
				// fails) is retried ever less often, and reported once
				// for each new reason.
				failDelay = min(max(2*failDelay, p.retryMin()), maxRetryDelay)
				backoff = failDelay
				if msg := err.Error(); p.warn != nil && msg != lastFailure {
					lastFailure = msg
					p.warn(fmt.Sprintf("skill %q: warm sandbox: %v (calls run cold; retrying, every %s at most)", p.sk.Name, err, maxRetryDelay))
				}
			} else {
				failDelay, lastFailure = 0, ""
			}
			continue
		}
		var retry <-chan time.Time
		if backoff > 0 {
			retry = time.After(backoff)
		}
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		case <-tick.C:
		case <-retry:
			backoff = 0
		}
	}
}

// maxRetryDelay bounds the wait between failed launches; the first
// waits retryMin (a second).
const maxRetryDelay = 5 * time.Minute

func (p *pool) retryMin() time.Duration {
	if p.retryFirst > 0 {
		return p.retryFirst
	}
	return time.Second
}

// refillQuiet is how long after the last call took a sandbox the pool
// waits before it refills (unless it is empty).
const refillQuiet = 20 * time.Millisecond

// answerGrace is how long after a call's answer the pool waits before it
// launches, and its used sandbox before it is destroyed, even when the
// pool is empty: the answer is written when the handler returns, and the
// client still has to be scheduled to read it. On two cores a launch or
// a teardown started at once took the CPU from it: with --pool 1, warm
// p50 4.8 -> 3.1 ms above the floor and p99 25 -> 12 ms with 10 ms
// (hack/mcpbench, 40 calls each). An agent's next call comes later than
// that; the launch it delays takes tens of milliseconds.
const answerGrace = 10 * time.Millisecond

// errRefused: the operator's grants do not cover the skill; every call
// is refused by the cold path, there is nothing to keep warm.
var errRefused = errors.New("policy refusal")

// launch prepares and launches one sandbox and adds it to the pool. A
// member's container lives on its own context: closing the pool kills
// the launching and the ready ones, not those serving a call (the call's
// context does).
func (p *pool) launch() error {
	defer p.work.start()()
	ctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()
	p.mu.Lock()
	when := p.when
	p.mu.Unlock()
	sb, refused, err := runner.Prepare(ctx, p.rt, p.sk, p.opts, when)
	if err == nil && refused != nil {
		err = fmt.Errorf("%w: %s", errRefused, refused.Error)
	}
	if err == nil {
		if err = sb.Launch(ctx); err != nil {
			sb.Close()
		}
	}
	if err != nil {
		cancel()
		p.mu.Lock()
		p.stats.Failed++
		p.mu.Unlock()
		return err
	}
	m := &member{sb: sb, born: time.Now(), cancel: cancel}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Launched++
	if p.ctx.Err() != nil {
		p.destroyLater(m)
		return p.ctx.Err()
	}
	p.ready = append(p.ready, m)
	return nil
}

// close stops the refill loop and destroys the sandboxes that wait for
// a call (and the one launching) before it returns. Those serving a call
// end with it (wait waits for them).
func (p *pool) close() {
	p.cancel()
	<-p.done
	p.mu.Lock()
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range ready {
		wg.Go(m.destroy)
	}
	wg.Wait()
}

// closePools closes pools side by side (a server's shutdown is bounded
// by its slowest pool, not by their sum: the client that stops a server
// kills it if it takes long) and, with wait, waits for the sandboxes
// their calls took.
func closePools(pools []*pool, wait bool) {
	var wg sync.WaitGroup
	for _, p := range pools {
		wg.Go(p.close)
	}
	wg.Wait()
	if wait {
		for _, p := range pools {
			p.wait()
		}
	}
}

// wait waits until every sandbox taken from the pool or being recycled
// is destroyed.
func (p *pool) wait() { p.closing.Wait() }

// snapshot returns the pool's counters and how many sandboxes are ready.
func (p *pool) snapshot() (poolStats, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats, len(p.ready)
}
