// Package sigfwd relays the signals a foreground runtime forwards to its
// container (`skillrun run` and `skillrun exec` without --detach) to a
// channel, as signal.Notify(c) with no signals named does for runc, at a
// fraction of its cost.
//
// os/signal enables each signal with a round trip to a goroutine of the
// Go runtime locked to its own thread (it unblocks the signal in that
// thread's mask): three or four context switches per signal, 3-5 ms of
// CPU for all of them on the project's machine, on every foreground run.
// Most of those signals need none of it: the Go runtime has caught them
// since the process started, and the unblocking is for a process started
// with them blocked, which a runtime seldom is. On Linux with cgo, a small C
// handler takes over every signal of a fixed list whose handler is the
// Go runtime's (SIGHUP, SIGINT, SIGQUIT, SIGABRT, SIGUSR1, SIGUSR2,
// SIGALRM, SIGTERM, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGWINCH, SIGIO, SIGPWR
// and the real-time signals 35-64) and writes each signal's number to a
// pipe that a goroutine reads (the self-pipe pattern): one sigaction(2)
// per signal, no thread switch. It also takes the signals the Go runtime
// leaves at their default until os/signal asks for them (SIGCONT,
// SIGTSTP, SIGTTIN, SIGTTOU and 34) when they are at their default. The
// others go through os/signal: SIGPIPE (without it, the Go runtime dies
// of an EPIPE on stdout or stderr), and a signal of the list found
// ignored, blocked, or (but those five) at its default.
//
// A forked child resets the Go runtime's handlers to the default before
// it execs, not those five: in a child before its exec, the handler puts
// the default back and sends the signal again, so the child gets what it
// would have without the relay and nothing reaches the pipe. While a
// Relay is in place, os/signal delivers none of its signals to any
// channel of the process (the Go runtime does not put its handler back
// while it believes it installed it); Stop puts every previous handler
// back.
//
// Elsewhere (no cgo, not Linux) a Relay is signal.Notify(c) itself.
package sigfwd

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Relay delivers signals to one channel until Stop.
type Relay struct {
	c     chan<- os.Signal
	ready chan struct{}
	taken uint64 // bit n-1: signal n comes from the C handler
	once  sync.Once
}

// Notify relays every signal a runtime forwards to c, as signal.Notify
// does: a send that would block is dropped, so c needs a buffer. The
// signals the C handler took over are relayed when Notify returns; the
// os/signal ones once Ready is closed (their registration runs in the
// background, while the caller sets up its container; until then such a
// signal gets the default action it had before, as under runc).
func Notify(c chan<- os.Signal) *Relay {
	r := &Relay{c: c, ready: make(chan struct{})}
	// An earlier relay's os/signal side still being undone would, once
	// done, put back the disposition it found (an ignored SIGHUP, say)
	// over a handler this one may take now.
	relays.waitStops()
	r.taken = relays.add(r)
	go func() {
		if r.taken == 0 {
			signal.Notify(c)
		} else {
			signal.Notify(c, rest(r.taken)...)
		}
		close(r.ready)
	}()
	return r
}

// Ready is closed once every signal is relayed.
func (r *Relay) Ready() <-chan struct{} { return r.ready }

// Stop ends the relay. The C handler's signals have their previous
// handlers back when Stop returns; os/signal's side is undone in the
// background, since signal.Stop waits for the runtime's signal loop to go
// idle (1.4 ms measured on the exit path of a foreground run). Until then
// a signal may still reach c. Stop is safe to call more than once.
func (r *Relay) Stop() {
	r.once.Do(func() {
		if r.taken != 0 {
			relays.remove(r)
		}
		relays.stopping.RLock() // held until os/signal's side is undone
		go func() {
			defer relays.stopping.RUnlock()
			<-r.ready
			signal.Stop(r.c)
		}()
	})
}

// pipeRelays is the one C relay of the process: signal dispositions are
// process-wide, so the handler, its pipe and the channels it feeds are
// too. The handler is installed while at least one Relay uses it.
type pipeRelays struct {
	mu    sync.Mutex
	users map[*Relay]struct{}
	w     int    // the pipe's write end, the handler's; -1 when not installed
	taken uint64 // the signals the handler took over
	// stopping is read-held by each os/signal Stop under way
	// (Relay.Stop); waitStops takes it to wait for them all.
	stopping sync.RWMutex
}

// waitStops returns once every os/signal Stop under way has ended: a
// signal's disposition is then the one os/signal found before it.
func (p *pipeRelays) waitStops() {
	p.stopping.Lock()
	p.stopping.Unlock() // nothing to guard: taking it was the wait
}

// relays is process-wide state by nature (see pipeRelays).
var relays = pipeRelays{w: -1}

// add makes r a user of the C relay, installing it when r is the first,
// and returns the signals it relays. None (0): the relay is not available
// here (no cgo, not Linux, no pipe to be had), and r must use os/signal
// for everything.
func (p *pipeRelays) add(r *Relay) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w < 0 {
		rd, w, taken, err := install()
		if err != nil {
			return 0
		}
		p.w, p.taken = w, taken
		p.users = map[*Relay]struct{}{}
		go p.read(rd, p.users)
	}
	p.users[r] = struct{}{}
	return p.taken
}

// remove ends r's use of the C relay; the last user uninstalls it.
func (p *pipeRelays) remove(r *Relay) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.users, r)
	if len(p.users) > 0 || p.w < 0 {
		return
	}
	// uninstall returns once no handler can write to the pipe any more:
	// closing it then cannot let a late handler write to a reused number.
	uninstall(p.w, p.taken)
	p.w, p.taken, p.users = -1, 0, nil
}

// read relays the signals the handler writes to the pipe to users (the
// set of the installation it belongs to) until the write end is closed.
func (p *pipeRelays) read(f *os.File, users map[*Relay]struct{}) {
	defer f.Close()
	var buf [64]byte
	for {
		n, err := f.Read(buf[:])
		if n > 0 {
			p.mu.Lock()
			for _, b := range buf[:n] {
				s := syscall.Signal(b)
				for r := range users {
					select {
					case r.c <- s:
					default:
					}
				}
			}
			p.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// rest is every signal a runtime forwards that is not in taken.
func rest(taken uint64) []os.Signal {
	var out []os.Signal
	for _, s := range forwarded() {
		if n := s.(syscall.Signal); taken&(1<<(uint(n)-1)) == 0 {
			out = append(out, s)
		}
	}
	return out
}
