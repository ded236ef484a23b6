//go:build integration

package security_test

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostIPs are the host's non-loopback, non-link-local addresses.
func hostIPs() []string {
	var ips []string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() {
			continue
		}
		ips = append(ips, n.IP.String())
	}
	return ips
}

// countAccepts accepts on l until it is closed (at the probe's end) and
// counts the connections; each is closed at once. A connection from the
// host first proves the listener reachable and the count working (the
// control), then the count starts from 0.
func countAccepts(p *P, l net.Listener) *atomic.Int64 {
	p.Helper()
	p.Cleanup(func() { l.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	c, err := net.DialTimeout(l.Addr().Network(), l.Addr().String(), 5*time.Second)
	if err != nil {
		p.Fatalf("control: the host cannot reach its own listener %s: %v", l.Addr(), err)
	}
	c.Close()
	for deadline := time.Now().Add(5 * time.Second); n.Load() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			p.Fatalf("control: listener %s counted %d of the host's 1 connection", l.Addr(), n.Load())
		}
	}
	n.Store(0)
	return &n
}

// tcpListener counts the connections it accepts; nil when the address
// cannot be listened on (no IPv6 on the host).
func tcpListener(p *P, network, addr string) (*atomic.Int64, int) {
	p.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, 0
	}
	return countAccepts(p, l), l.Addr().(*net.TCPAddr).Port
}

// unixListener listens on a unix socket (abstract when addr starts with
// "@"; a path anyone may connect to otherwise) and counts the
// connections it accepts.
func unixListener(p *P, addr string) *atomic.Int64 {
	p.Helper()
	l, err := net.Listen("unix", addr)
	if err != nil {
		p.Fatalf("listen unix %s: %v", addr, err)
	}
	if !strings.HasPrefix(addr, "@") {
		os.Chmod(addr, 0o777)
	}
	return countAccepts(p, l)
}

// udpListener counts the datagrams it receives.
func udpListener(p *P, addr string) (*atomic.Int64, int) {
	p.Helper()
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		p.Fatalf("listen udp %s: %v", addr, err)
	}
	p.Cleanup(func() { c.Close() })
	var n atomic.Int64
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := c.ReadFrom(buf); err != nil {
				return
			}
			n.Add(1)
		}
	}()
	return &n, c.LocalAddr().(*net.UDPAddr).Port
}

const connectPy = `
def tcp(host, port):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(1)
    s.connect((host, port))
    s.sendall(b"hello from the sandbox")
    return "connected"
def unix_abstract(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1)
    s.connect("\0" + name)
    return "connected"
def udp(host, port):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    for _ in range(3):
        s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01", (host, port))
    return "sent"
for t in REQ.get("tcp", []):
    attempt("tcp %s %d" % (t[0], t[1]), lambda t=t: tcp(t[0], t[1]))
for t in REQ.get("udp", []):
    attempt("udp %s %d" % (t[0], t[1]), lambda t=t: udp(t[0], t[1]))
for n in REQ.get("abstract", []):
    attempt("abstract " + n, lambda n=n: unix_abstract(n))
for h in REQ.get("resolve", []):
    attempt("resolve " + h, lambda h=h: socket.getaddrinfo(h, 443))
attempt("/etc/resolv.conf", lambda: open("/etc/resolv.conf").read())
done()
`

// TestNetHostLoopback: listeners the test opens on the host (loopback,
// the host's addresses, an abstract unix socket, UDP) are never reached.
func TestNetHostLoopback(t *testing.T) {
	probe(t, "net/host-loopback", func(p *P, m *mode) {
		type counter struct {
			what string
			n    *atomic.Int64
		}
		var counters []counter
		var tcp [][]any
		n4, port4 := tcpListener(p, "tcp4", "127.0.0.1:0")
		counters = append(counters, counter{fmt.Sprintf("tcp 127.0.0.1:%d", port4), n4})
		tcp = append(tcp, []any{"127.0.0.1", port4}, []any{"localhost", port4})
		if n6, port6 := tcpListener(p, "tcp6", "[::1]:0"); n6 != nil {
			counters = append(counters, counter{fmt.Sprintf("tcp [::1]:%d", port6), n6})
			tcp = append(tcp, []any{"::1", port6})
		}
		nAll, portAll := tcpListener(p, "tcp", ":0")
		counters = append(counters, counter{fmt.Sprintf("tcp *:%d", portAll), nAll})
		for _, ip := range append(hostIPs(), "127.0.0.1", "10.0.2.2", "172.17.0.1") {
			tcp = append(tcp, []any{ip, portAll})
		}
		nu, portU := udpListener(p, ":0")
		counters = append(counters, counter{fmt.Sprintf("udp *:%d", portU), nu})
		var udp [][]any
		for _, ip := range append(hostIPs(), "127.0.0.1") {
			udp = append(udp, []any{ip, portU})
		}
		abstract := "skillrun-sec-" + randHex(6)
		na := unixListener(p, "@"+abstract)
		counters = append(counters, counter{"abstract unix @" + abstract, na})
		// The control, from the host itself: every listener is reachable
		// on every address the sandbox will try (a host firewall or a
		// missing address would make the zero counts below prove nothing).
		hostReach(p, "tcp", tcp)
		hostReach(p, "udp", udp)
		if c, err := net.Dial("unix", "@"+abstract); err == nil {
			c.Close()
		}
		time.Sleep(200 * time.Millisecond)
		base := make([]int64, len(counters))
		for i, c := range counters {
			if base[i] = c.n.Load(); base[i] == 0 {
				p.Fatalf("control: the host itself could not reach its listener %s: the probe would prove nothing", c.what)
			}
		}
		sk := pyProbe(p, m, "lo", connectPy, "")
		o := m.skill(p, sk, mustJSON(map[string]any{"tcp": tcp, "udp": udp, "abstract": []string{abstract}}))
		o.wantCode(p, 0)
		o.out(p)
		time.Sleep(200 * time.Millisecond) // let in-flight accepts land
		for i, c := range counters {
			if n := c.n.Load() - base[i]; n != 0 {
				p.Errorf("LEAK: the host listener %s accepted %d connections/datagrams from the sandbox", c.what, n)
			}
		}
	})
}

// hostReach connects (tcp) or sends a datagram (udp) from the host to
// each [host, port] target the sandbox will try, as the control of a
// probe; targets the host has no route to are skipped (their listener's
// count is checked by the caller).
func hostReach(p *P, network string, targets [][]any) {
	p.Helper()
	for _, t := range targets {
		addr := net.JoinHostPort(fmt.Sprint(t[0]), fmt.Sprint(t[1]))
		c, err := net.DialTimeout(network, addr, time.Second)
		if err != nil {
			p.Logf("control: %s %s from the host: %v", network, addr, err)
			continue
		}
		c.Write([]byte("control from the host"))
		c.Close()
	}
}

// TestNetDNS: names do not resolve, and DNS queries reach no resolver:
// not the host's, not one the test runs on the host.
func TestNetDNS(t *testing.T) {
	probe(t, "net/dns", func(p *P, m *mode) {
		nu, portU := udpListener(p, ":0")
		udp := [][]any{{"127.0.0.1", portU}, {"8.8.8.8", 53}, {"1.1.1.1", 53}}
		for _, ip := range hostIPs() {
			udp = append(udp, []any{ip, portU})
		}
		for _, line := range readLines("/etc/resolv.conf") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" {
				udp = append(udp, []any{f[1], 53})
			}
		}
		// The control: the host reaches the test's resolver.
		hostReach(p, "udp", [][]any{{"127.0.0.1", portU}})
		time.Sleep(100 * time.Millisecond)
		base := nu.Load()
		if base == 0 {
			p.Fatalf("control: the host itself could not reach the test's resolver on udp port %d: the probe would prove nothing", portU)
		}
		if _, err := net.LookupHost("example.com"); err != nil {
			p.Logf("the host itself cannot resolve example.com (%v): the sandbox failing to resolve proves less here", err)
		}
		sk := pyProbe(p, m, "dns", connectPy, "")
		o := m.skill(p, sk, mustJSON(map[string]any{"udp": udp, "resolve": []string{"example.com", "github.com", "pypi.org"}}))
		o.wantCode(p, 0)
		out := o.out(p)
		for _, h := range []string{"example.com", "github.com", "pypi.org"} {
			if v := str(out, "resolve "+h); !strings.HasPrefix(v, "error gaierror") && !strings.HasPrefix(v, "errno") {
				p.Errorf("LEAK: %s resolved inside the sandbox: %s", h, v)
			}
		}
		if v := str(out, "/etc/resolv.conf"); !strings.HasPrefix(v, "errno 2") {
			p.Errorf("the host's resolv.conf is visible without network: %s", v)
		}
		time.Sleep(200 * time.Millisecond)
		if n := nu.Load() - base; n != 0 {
			p.Errorf("LEAK: the test's resolver on the host (udp port %d) received %d queries from the sandbox", portU, n)
		}
	})
}

// TestNetInbound: a listener inside the sandbox cannot be reached from
// the host while it listens.
func TestNetInbound(t *testing.T) {
	probe(t, "net/inbound", func(p *P, m *mode) {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			p.Fatalf("%v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		sk := pyProbe(p, m, "in", `
port = REQ["port"]
socks = []
for fam, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
    def b(fam=fam, addr=addr):
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((addr, port))
        s.listen(16)
        s.setblocking(False)
        socks.append(s)
    attempt("bind " + addr, b)
OUT["bound_at"] = time.time()
time.sleep(REQ["hold"])
OUT["until"] = time.time()
n = 0
for s in socks:
    try:
        while True:
            s.accept(); n += 1
    except OSError:
        pass
OUT["accepted"] = n
done()
`, "")
		targets := []string{"127.0.0.1", "::1"}
		targets = append(targets, hostIPs()...)
		var mu sync.Mutex
		var attempts []time.Time
		var reached []string
		o := m.run(p, sk, runOpts{
			input: mustJSON(map[string]any{"port": port, "hold": 3}),
			during: func() {
				time.Sleep(300 * time.Millisecond)
				for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); {
					for _, ip := range targets {
						c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, fmt.Sprint(port)), 200*time.Millisecond)
						mu.Lock()
						attempts = append(attempts, time.Now())
						if err == nil {
							reached = append(reached, ip)
							c.Close()
						}
						mu.Unlock()
					}
					time.Sleep(100 * time.Millisecond)
				}
			},
		})
		o.wantCode(p, 0)
		out := o.out(p)
		if str(out, "bind 0.0.0.0") != "ok" {
			p.Fatalf("the probe could not listen inside: %s", str(out, "bind 0.0.0.0"))
		}
		from, _ := out["bound_at"].(float64)
		until, _ := out["until"].(float64)
		inWindow := 0
		for _, a := range attempts {
			s := float64(a.UnixNano()) / 1e9
			if s > from && s < until {
				inWindow++
			}
		}
		if inWindow < 3 {
			p.Fatalf("only %d connection attempts happened while the probe listened (%.3f-%.3f): the probe proves nothing", inWindow, from, until)
		}
		if len(reached) > 0 {
			p.Errorf("LEAK: the sandbox's listener on port %d was reached from the host via %v", port, reached)
		}
		if n, _ := out["accepted"].(float64); n != 0 {
			p.Errorf("LEAK: the sandbox's listener accepted %v connections", n)
		}
	})
}

// TestNetRawPacket: raw and packet sockets cannot be created.
func TestNetRawPacket(t *testing.T) {
	probe(t, "net/raw-packet", func(p *P, m *mode) {
		sk := pyProbe(p, m, "raw", `
tries = {
    "AF_PACKET SOCK_RAW": (17, 3, 0x0300),
    "AF_PACKET SOCK_DGRAM": (17, 2, 0x0300),
    "AF_INET SOCK_RAW ICMP": (2, 3, 1),
    "AF_INET SOCK_RAW|NONBLOCK|CLOEXEC": (2, 3 | 0o4000 | 0o2000000, 255),
    "AF_INET6 SOCK_RAW": (10, 3, 58),
    "AF_INET SOCK_PACKET (obsolete)": (2, 10, 0x0300),
    "AF_NETLINK SOCK_RAW": (16, 3, 0),
}
for k, (fam, typ, proto) in tries.items():
    attempt(k, lambda fam=fam, typ=typ, proto=proto: socket.socket(fam, typ, proto).close())
done()
`, "")
		o := m.skill(p, sk, "{}")
		o.wantCode(p, 0)
		out := o.out(p)
		for _, k := range []string{"AF_PACKET SOCK_RAW", "AF_PACKET SOCK_DGRAM", "AF_INET SOCK_RAW ICMP", "AF_INET SOCK_RAW|NONBLOCK|CLOEXEC", "AF_INET6 SOCK_RAW", "AF_INET SOCK_PACKET (obsolete)"} {
			if v := str(out, k); v != "errno 1" && v != "errno 13" {
				p.Errorf("LEAK: socket(%s) = %s, want EPERM or EACCES", k, v)
			}
		}
	})
}
