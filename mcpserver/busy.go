package mcpserver

import "sync"

// busy counts the server's work in flight that wants every CPU: a
// sandbox's launch and a cold run (the Go side of a container's start,
// its spec's encoding: about 10 ms of the server's own CPU each), and a
// warm call whose sandbox has a network allowlist (this process relays
// its traffic). It tells Options.Busy when such work starts while none
// ran (true) and when the last of it ends (false), in the order it
// happened; a warm call without network is not such work. A nil busy or
// one without a func counts nothing.
type busy struct {
	mu sync.Mutex
	n  int
	f  func(bool)
}

// start marks one piece of work; the returned func ends it (call it
// once).
func (b *busy) start() (end func()) {
	if b == nil || b.f == nil {
		return func() {}
	}
	b.mu.Lock()
	b.n++
	if b.n == 1 {
		b.f(true)
	}
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.n--
		if b.n == 0 {
			b.f(false)
		}
		b.mu.Unlock()
	}
}
