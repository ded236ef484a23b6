package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skillrun/skillrun/egress/policy"
)

// Refusal is one refused attempt (counted when repeated).
type Refusal struct {
	// Host is the name (or address) the sandbox asked for.
	Host string `json:"host"`
	// Port is the port, 0 for a DNS query.
	Port int `json:"port,omitempty"`
	// Reason says why it was refused.
	Reason string `json:"reason"`
	// Count is how many times.
	Count int `json:"count"`
}

// Report is what the server saw.
type Report struct {
	// Connections is the number of connections relayed to a host.
	Connections int64 `json:"connections"`
	// Refused lists refused attempts, first ones first (at most 100
	// distinct, plus 16 distinct refusals of a bound, whose reasons
	// start with "limit: "; RefusedDropped counts the others).
	Refused []Refusal `json:"refused,omitempty"`
	// RefusedDropped counts refusals beyond the list's bound.
	RefusedDropped int64 `json:"refused_dropped,omitempty"`
}

// Sockets are the sandbox-side sockets the host side serves: the DNS's
// UDP socket and one TCP listener per port (in the sandbox: 53 for DNS
// over TCP and 3128 for the proxy on 127.0.0.1, each allowed port for
// the synthetic addresses on 0.0.0.0, 53 and 3128 too when allowed).
type Sockets struct {
	DNS *net.UDPConn
	TCP map[int]*net.TCPListener
	// Init, when not nil, is a pidfd of the container's init: it becomes
	// readable when the init exits.
	Init *os.File
}

// Close closes every socket.
func (s *Sockets) Close() {
	if s == nil {
		return
	}
	if s.DNS != nil {
		s.DNS.Close()
	}
	for _, l := range s.TCP {
		l.Close()
	}
	if s.Init != nil {
		s.Init.Close()
	}
}

// server is the state of one Serve.
type server struct {
	policy *policy.Policy
	mu     sync.Mutex
	byName map[string]netip.Addr
	byAddr map[netip.Addr]string
	next   netip.Addr
	report Report
	index  map[Refusal]int // key with Count 0
	conns  sync.WaitGroup
	live   map[net.Conn]struct{}
	bulk   *bulkBuffers
	// maxOpen and maxRelayed are maxOpenConns and maxRelayed (tests and
	// benchmarks change them).
	maxOpen, maxRelayed int
	// headTimeout is headTimeout (tests shorten it).
	headTimeout time.Duration
	// serving counts the sandbox's connections being served (maxOpen),
	// relayed the connections to hosts attempted (maxRelayed),
	// limitRefusals the distinct refusals of a bound listed.
	serving       int
	relayed       int
	limitRefusals int
	// parsers holds a token per head being parsed (maxHeadParsers).
	parsers chan struct{}
	// dialHook, when set (tests), replaces the dialer: it sees every
	// address a connection to a host is attempted to.
	dialHook func(ctx context.Context, addr netip.AddrPort) (*net.TCPConn, error)
}

// Serve serves the sockets with the policy until ctx ends, then closes
// them and every relayed connection and returns what it saw. It takes
// ownership of socks.
func Serve(ctx context.Context, socks *Sockets, p *policy.Policy) *Report {
	return newServer(p).serve(ctx, socks)
}

func (s *server) serve(ctx context.Context, socks *Sockets) *Report {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if socks.DNS != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.serveUDP(socks.DNS) }()
	}
	for port, l := range socks.TCP {
		wg.Add(1)
		go func() { defer wg.Done(); s.accept(ctx, port, l) }()
	}
	<-ctx.Done()
	socks.Close()
	wg.Wait()
	s.mu.Lock()
	for c := range s.live {
		c.Close()
	}
	s.mu.Unlock()
	s.conns.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.report
	r.Refused = append([]Refusal(nil), r.Refused...)
	return &r
}

func newServer(p *policy.Policy) *server {
	return &server{
		policy: p,
		byName: map[string]netip.Addr{},
		byAddr: map[netip.Addr]string{},
		next:   syntheticLo.Next(),
		index:  map[Refusal]int{},
		live:   map[net.Conn]struct{}{},
		bulk:   newBulkBuffers(maxBulkBuffers),

		parsers:     make(chan struct{}, maxHeadParsers),
		maxOpen:     maxOpenConns,
		maxRelayed:  maxRelayed,
		headTimeout: headTimeout,
	}
}

// refuse records a refusal: its host and reason cut (maxRefusalHost,
// maxRefusalReason), counted when it repeats, listed while there is room
// (refusals of a bound have room of their own).
func (s *server) refuse(host string, port int, format string, a ...any) {
	k := Refusal{Host: clip(host, maxRefusalHost), Port: port, Reason: clip(fmt.Sprintf(format, a...), maxRefusalReason)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.index[k]; ok {
		s.report.Refused[i].Count++
		return
	}
	if strings.HasPrefix(k.Reason, limitPrefix) {
		if s.limitRefusals >= maxLimitRefusals {
			s.report.RefusedDropped++
			return
		}
		s.limitRefusals++
	} else if len(s.report.Refused)-s.limitRefusals >= maxRefusals {
		s.report.RefusedDropped++
		return
	}
	s.index[k] = len(s.report.Refused)
	k.Count = 1
	s.report.Refused = append(s.report.Refused, k)
}

// addrFor returns the synthetic address of an allowed name, assigning
// one the first time.
func (s *server) addrFor(name string) (netip.Addr, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.byName[name]; ok {
		return a, true
	}
	if len(s.byName) >= maxNames || !SyntheticPrefix.Contains(s.next) {
		return netip.Addr{}, false
	}
	a := s.next
	s.next = a.Next()
	s.byName[name], s.byAddr[a] = a, name
	return a, true
}

// nameOf returns the name a synthetic address was given to.
func (s *server) nameOf(a netip.Addr) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.byAddr[a]
	return n, ok
}

// track registers a live connection so that the end of Serve closes it.
func (s *server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		return false
	}
	s.live[c] = struct{}{}
	return true
}

func (s *server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.live, c)
	s.mu.Unlock()
}

// accept serves one TCP listener: by the address the sandbox connected
// to, DNS over TCP (127.0.0.1:53), the proxy (127.0.0.1:3128) or a
// synthetic address.
func (s *server) accept(ctx context.Context, port int, l *net.TCPListener) {
	for {
		c, err := l.AcceptTCP()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like
			continue
		}
		if !s.admit(port, c) {
			continue
		}
		if !s.track(c) {
			s.leave()
			c.Close()
			return
		}
		s.conns.Add(1)
		go func() {
			defer s.conns.Done()
			defer s.leave()
			defer s.untrack(c)
			defer c.Close()
			s.handle(ctx, port, c)
		}()
	}
}

// admit counts a connection of the sandbox's in (maxOpenConns), or
// refuses and closes it.
func (s *server) admit(port int, c *net.TCPConn) bool {
	s.mu.Lock()
	ok := s.serving < s.maxOpen
	if ok {
		s.serving++
	}
	s.mu.Unlock()
	if !ok {
		host := "?"
		if la, _ := c.LocalAddr().(*net.TCPAddr); la != nil {
			a := la.AddrPort().Addr().Unmap()
			host = a.String()
			if n, known := s.nameOf(a); known {
				host = n
			}
		}
		c.Close()
		s.refuse(host, port, limitPrefix+"%d connections open at once", s.maxOpen)
	}
	return ok
}

// leave counts a connection of the sandbox's out.
func (s *server) leave() {
	s.mu.Lock()
	s.serving--
	s.mu.Unlock()
}

func (s *server) handle(ctx context.Context, port int, c *net.TCPConn) {
	la, _ := c.LocalAddr().(*net.TCPAddr)
	if la == nil {
		return
	}
	local := la.AddrPort().Addr().Unmap()
	switch {
	case local == netip.AddrFrom4([4]byte{127, 0, 0, 1}) && port == DNSPort:
		s.serveDNSTCP(c)
	case local == netip.AddrFrom4([4]byte{127, 0, 0, 1}) && port == ProxyPort:
		s.serveProxy(ctx, c)
	case SyntheticPrefix.Contains(local):
		name, ok := s.nameOf(local)
		if !ok {
			s.refuse(local.String(), port, "address not given out by the sandbox's DNS")
			return
		}
		if !s.policy.Allows(name, port) {
			s.refuse(name, port, "port not allowed for this host")
			return
		}
		s.relay(ctx, newClientConn(c), name, port, nil)
	default:
		s.refuse(local.String(), port, "not a synthetic address")
	}
}

// dial resolves name on the host (after the policy check) and connects
// to name:port.
func (s *server) dial(ctx context.Context, name string, port int) (*net.TCPConn, error) {
	addrs, err := s.resolve(ctx, name, port)
	if err != nil {
		return nil, err
	}
	return s.connect(ctx, addrs, port)
}

// resolve counts a connection to a host (maxRelayed: past it, an error
// whose text starts with "limit: ") and returns the addresses of the
// allowed name:port: the operator's mapping, or the host's lookup, every
// address of which must be public (no rebinding to the host's networks).
func (s *server) resolve(ctx context.Context, name string, port int) ([]netip.Addr, error) {
	s.mu.Lock()
	ok := s.relayed < s.maxRelayed
	if ok {
		s.relayed++
	}
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf(limitPrefix+"%d connections to hosts in one run", s.maxRelayed)
	}
	key := name + ":" + strconv.Itoa(port)
	if a, ok := s.policy.Resolve[key]; ok {
		return []netip.Addr{a}, nil
	}
	lookup := s.policy.LookupNetIP
	if lookup == nil {
		lookup = net.DefaultResolver.LookupNetIP
	}
	lctx, cancel := context.WithTimeout(ctx, dialTimeout)
	found, err := lookup(lctx, "ip", name)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("host lookup failed")
	}
	var addrs []netip.Addr
	for _, a := range found {
		if !policy.IsPublic(a) {
			return nil, fmt.Errorf("resolves to a non-public address %s (map it with --resolve to allow it)", a.Unmap())
		}
		addrs = append(addrs, a.Unmap())
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("host lookup found no address")
	}
	return addrs, nil
}

// connect connects to the first of addrs that answers on port.
func (s *server) connect(ctx context.Context, addrs []netip.Addr, port int) (*net.TCPConn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	var last error
	for _, a := range addrs {
		if s.dialHook != nil {
			c, err := s.dialHook(ctx, netip.AddrPortFrom(a, uint16(port)))
			if err == nil {
				return c, nil
			}
			last = err
			continue
		}
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c.(*net.TCPConn), nil
		}
		last = err
	}
	var oe *net.OpError
	if errors.As(last, &oe) && oe.Err != nil {
		last = oe.Err
	}
	return nil, fmt.Errorf("connect failed: %v", last)
}
