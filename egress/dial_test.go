package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/skillrun/skillrun/egress/policy"
)

// rebindServer is a server whose host lookups answer addrs and whose
// dialer records every attempt (and connects to none).
type rebindServer struct {
	*server
	mu      sync.Mutex
	lookups []string
	dials   []netip.AddrPort
}

var errNoDial = errors.New("test: not dialled")

func newRebindServer(t *testing.T, port int, addrs ...string) *rebindServer {
	t.Helper()
	r, err := policy.ParseRule(fmt.Sprintf("api.test:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	rs := &rebindServer{}
	pol := &policy.Policy{Rules: []policy.Rule{r}, LookupNetIP: func(_ context.Context, _, host string) ([]netip.Addr, error) {
		rs.mu.Lock()
		rs.lookups = append(rs.lookups, host)
		rs.mu.Unlock()
		var out []netip.Addr
		for _, a := range addrs {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}}
	rs.server = newServer(pol)
	rs.dialHook = func(_ context.Context, a netip.AddrPort) (*net.TCPConn, error) {
		rs.mu.Lock()
		rs.dials = append(rs.dials, a)
		rs.mu.Unlock()
		return nil, errNoDial
	}
	return rs
}

func (rs *rebindServer) seen() ([]string, []netip.AddrPort) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]string(nil), rs.lookups...), append([]netip.AddrPort(nil), rs.dials...)
}

// TestDialRebinding: an allowed name that the host's resolver answers
// with a private, loopback, link-local or metadata address (all of them,
// or mixed with a public one, in either order) is refused before any
// connection is attempted: the dialer sees nothing.
func TestDialRebinding(t *testing.T) {
	const port = 443
	for _, addrs := range [][]string{
		{"10.1.2.3"},
		{"169.254.169.254"},
		{"127.0.0.1"},
		{"192.168.1.1"},
		{"172.16.0.1"},
		{"100.64.0.1"},
		{"0.0.0.0"},
		{"198.18.0.2"}, // the sandbox's own synthetic range
		{"::1"},
		{"fd00:ec2::254"},
		{"fe80::1"},
		{"::ffff:10.0.0.1"},
		{"::ffff:169.254.169.254"},
		{"64:ff9b::a9fe:a9fe"}, // NAT64 of 169.254.169.254
		{"93.184.216.34", "10.0.0.1"},
		{"10.0.0.1", "93.184.216.34"},
		{"2606:2800:220:1::1", "169.254.169.254"},
	} {
		t.Run(strings.Join(addrs, ","), func(t *testing.T) {
			rs := newRebindServer(t, port, addrs...)
			c, err := rs.dial(context.Background(), "api.test", port)
			if err == nil {
				c.Close()
				t.Fatal("dial succeeded")
			}
			lookups, dials := rs.seen()
			if len(dials) != 0 {
				t.Errorf("LEAK: connections were attempted to %v", dials)
			}
			if len(lookups) != 1 || lookups[0] != "api.test" {
				t.Errorf("lookups %v, want one of api.test", lookups)
			}
			if !strings.Contains(err.Error(), "non-public address") {
				t.Errorf("err = %v, want a non-public refusal", err)
			}
		})
	}
}

// TestDialPublic is the control: a public answer is dialled (the hook
// sees it), so TestDialRebinding's empty dial list means something. A
// --resolve mapping is dialled as mapped (private allowed), without a
// lookup.
func TestDialPublic(t *testing.T) {
	rs := newRebindServer(t, 443, "93.184.216.34", "2606:2800:220:1::1")
	if _, err := rs.dial(context.Background(), "api.test", 443); !errors.Is(err, errNoDial) && (err == nil || !strings.Contains(err.Error(), errNoDial.Error())) {
		t.Errorf("err = %v, want the hook's", err)
	}
	if _, dials := rs.seen(); len(dials) != 2 || dials[0].String() != "93.184.216.34:443" || dials[1].String() != "[2606:2800:220:1::1]:443" {
		t.Errorf("dials = %v, want both public addresses", dials)
	}

	mapped := newRebindServer(t, 443, "93.184.216.34")
	mapped.policy.Resolve = map[string]netip.Addr{"api.test:443": netip.MustParseAddr("10.9.8.7")}
	mapped.dial(context.Background(), "api.test", 443)
	if lookups, dials := mapped.seen(); len(lookups) != 0 || len(dials) != 1 || dials[0].String() != "10.9.8.7:443" {
		t.Errorf("mapped: lookups %v dials %v, want no lookup and 10.9.8.7:443", lookups, dials)
	}
}

// TestNoLookupBeforePolicy: a name the policy does not allow is never
// looked up on the host (no DNS query leaves for it), through the proxy
// (CONNECT and absolute-form) and on a port not granted.
func TestNoLookupBeforePolicy(t *testing.T) {
	rs := newRebindServer(t, 443, "93.184.216.34")
	for _, req := range []string{
		"CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n",
		"CONNECT api.test:8443 HTTP/1.1\r\nHost: api.test:8443\r\n\r\n",
		"GET http://other.test:443/ HTTP/1.1\r\nHost: other.test:443\r\n\r\n",
		"CONNECT 10.0.0.1:443 HTTP/1.1\r\nHost: 10.0.0.1:443\r\n\r\n",
	} {
		got := exchange(t, func(c *net.TCPConn) { rs.serveProxy(context.Background(), c) }, req, nil)
		if !strings.HasPrefix(got, "HTTP/1.1 403") {
			t.Errorf("%q: got %q, want 403", req, got)
		}
	}
	if lookups, dials := rs.seen(); len(lookups) != 0 || len(dials) != 0 {
		t.Errorf("LEAK: lookups %v, dials %v for names the policy refuses", lookups, dials)
	}
}
