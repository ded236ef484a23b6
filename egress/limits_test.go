package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/skillrun/skillrun/egress/policy"
)

// The bounds of what a sandbox can make the host side spend (limits.go),
// each judged by what the test origin received and by the refusal the
// report counts; the memory ones by the process's own heap.

// route serves one client connection as the direct (synthetic address)
// route or the proxy does; request formats a request for path with
// extra header lines in the route's form.
type route struct {
	name    string
	serve   func(s *server, c *net.TCPConn)
	request func(hp, path, extra string) string
}

func routes(port int) []route {
	return []route{
		{"direct", func(s *server, c *net.TCPConn) {
			s.relay(context.Background(), newClientConn(c), "api.test", port, nil)
		},
			func(hp, path, extra string) string {
				return "GET " + path + " HTTP/1.1\r\nHost: " + hp + "\r\n" + extra + "\r\n"
			}},
		{"proxy", func(s *server, c *net.TCPConn) { s.serveProxy(context.Background(), c) },
			func(hp, path, extra string) string {
				return "GET http://" + hp + path + " HTTP/1.1\r\nHost: " + hp + "\r\n" + extra + "\r\n"
			}},
	}
}

// bigHeader streams a request head of n bytes of header fields (one
// field name and value, folded into 1 KiB lines) to w, without its end.
func bigHeader(w io.Writer, n int) error {
	line := []byte("X-Big: " + strings.Repeat("a", 1024-9) + "\r\n")
	for sent := 0; sent < n; sent += len(line) {
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	return nil
}

// allocated returns the bytes the process allocated while fn ran.
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestLimitHeadSize: a request head over maxHeadBytes is refused and
// never buffered, the first request of a connection and the second of a
// kept-alive one, direct and through the proxy; the origin never gets
// it. Control: a head just under the bound passes.
func TestLimitHeadSize(t *testing.T) {
	for _, second := range []bool{false, true} {
		for _, rt := range routes(0) {
			t.Run(fmt.Sprintf("%s/second=%v", rt.name, second), func(t *testing.T) {
				o := startTestOrigin(t)
				rt := routes(o.port)[map[string]int{"direct": 0, "proxy": 1}[rt.name]]
				s := newServer(testPolicy(t, o.port))
				hp := fmt.Sprintf("api.test:%d", o.port)
				// Control: 30 KiB of header fields pass.
				exchange(t, func(c *net.TCPConn) { rt.serve(s, c) },
					rt.request(hp, "/fits", "X-Fits: "+strings.Repeat("f", 30<<10)+"\r\nConnection: close\r\n"), nil)
				first := ""
				if second {
					first = rt.request(hp, "/first", "")
				}
				var mem uint64
				got := exchange(t, func(c *net.TCPConn) { mem = allocated(func() { rt.serve(s, c) }) },
					first+rt.request(hp, "/big", "")[:len(rt.request(hp, "/big", ""))-2],
					func(c net.Conn, br *bufio.Reader) string {
						go io.Copy(io.Discard, br)
						err := bigHeader(c, 16<<20)
						return fmt.Sprint(err)
					})
				_, raw, served := o.settled(t)
				want := "GET /fits host=" + hp + " ua=- upgrade="
				if second {
					want += "|GET /first host=" + hp + " ua=- upgrade="
				}
				if strings.Join(served, "|") != want {
					t.Errorf("the origin served %q, want %q", served, want)
				}
				if strings.Contains(raw, "/big") {
					t.Errorf("LEAK: the origin read the big request")
				}
				if got == "<nil>" {
					t.Errorf("the client wrote the whole 16 MiB head: the relay read it")
				}
				if !hasRefusal(s.refusals(), "limit: request head over 32768 bytes") {
					t.Errorf("no limit refusal: %+v", s.refusals())
				}
				if mem > 4<<20 {
					t.Errorf("serving the connection allocated %d KiB, want < 4 MiB (the head buffered?)", mem>>10)
				}
			})
		}
	}
}

// TestLimitHeadDeadline: every request head of a connection must be
// whole within headTimeout of its first byte; a second head trickled on
// a kept-alive connection is refused and never reaches the origin.
// Control: a second request sent at once after an idle pause longer
// than headTimeout passes (the wait between requests is the client's).
func TestLimitHeadDeadline(t *testing.T) {
	for _, rt := range routes(0) {
		t.Run(rt.name, func(t *testing.T) {
			o := startTestOrigin(t)
			rt := routes(o.port)[map[string]int{"direct": 0, "proxy": 1}[rt.name]]
			s := newServer(testPolicy(t, o.port))
			s.headTimeout = 300 * time.Millisecond
			hp := fmt.Sprintf("api.test:%d", o.port)
			readOne := func(br *bufio.Reader) string {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					return err.Error()
				}
				b, _ := io.ReadAll(resp.Body)
				return string(b)
			}
			got := exchange(t, func(c *net.TCPConn) { rt.serve(s, c) }, rt.request(hp, "/first", ""),
				func(c net.Conn, br *bufio.Reader) string {
					a := readOne(br)
					time.Sleep(600 * time.Millisecond) // idle: allowed
					io.WriteString(c, rt.request(hp, "/idle", ""))
					b := readOne(br)
					// Trickled: one byte per 50 ms, 1.5 s in all.
					start := time.Now()
					req := rt.request(hp, "/trickled", "X-Pad: "+strings.Repeat("p", 20)+"\r\n")
					for i := 0; i < len(req); i++ {
						if _, err := c.Write([]byte{req[i]}); err != nil {
							break
						}
						time.Sleep(50 * time.Millisecond)
						if time.Since(start) > 3*time.Second {
							break
						}
					}
					rest, _ := io.ReadAll(br)
					return a + "|" + b + "|" + string(rest) + fmt.Sprintf("|closed after %v", time.Since(start).Round(100*time.Millisecond))
				})
			_, raw, served := o.settled(t)
			want := "GET /first host=" + hp + " ua=- upgrade=|GET /idle host=" + hp + " ua=- upgrade="
			if strings.Join(served, "|") != want {
				t.Errorf("the origin served %q, want %q (client: %q)", served, want, got)
			}
			if strings.Contains(raw, "trickled") {
				t.Errorf("LEAK: the origin read the trickled request")
			}
			if !hasRefusal(s.refusals(), "limit: request head not complete within 300ms") {
				t.Errorf("no limit refusal: %+v (client: %q)", s.refusals(), got)
			}
		})
	}
}

// serveTest runs s's accept loops on a proxy listener (127.0.0.1 on a
// free port, served as the proxy's) until the test ends; it returns the
// listener's address.
func serveTest(t *testing.T, s *server) string {
	t.Helper()
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.serve(ctx, &Sockets{TCP: map[int]*net.TCPListener{ProxyPort: l}}) }()
	t.Cleanup(func() { cancel(); <-done })
	return l.Addr().String()
}

// holdOrigin accepts connections, counts them, reads each one's request
// and holds it without an answer until the test ends.
func holdOrigin(t *testing.T) (port int, accepted *atomic.Int64, release func()) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			go io.Copy(io.Discard, c)
		}
	}()
	release = func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		held = nil
		mu.Unlock()
	}
	t.Cleanup(func() { l.Close(); release() })
	return l.Addr().(*net.TCPAddr).Port, &n, release
}

func waitUntil(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// TestLimitOpenConns: past maxOpen connections held at once, one more is
// closed at once and counted; the origin never sees it. Control: the
// first maxOpen reach the origin, and once they end a new one does too.
func TestLimitOpenConns(t *testing.T) {
	port, accepted, release := holdOrigin(t)
	s := newServer(testPolicy(t, port))
	s.maxOpen = 8
	addr := serveTest(t, s)
	req := fmt.Sprintf("GET http://api.test:%d/hold HTTP/1.1\r\nHost: api.test:%d\r\n\r\n", port, port)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, req)
		conns = append(conns, c)
		return c
	}
	for range 8 {
		dial()
	}
	if !waitUntil(5*time.Second, func() bool { return accepted.Load() == 8 }) {
		t.Fatalf("control: the origin accepted %d of the 8 held connections", accepted.Load())
	}
	extra := dial()
	extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := extra.Read(make([]byte, 1)); err == nil {
		t.Errorf("the 9th connection read %d bytes, want it closed", n)
	}
	time.Sleep(100 * time.Millisecond)
	if n := accepted.Load(); n != 8 {
		t.Errorf("LEAK: the origin accepted %d connections, want 8", n)
	}
	if !hasRefusal(s.refusals(), "limit: 8 connections open at once") {
		t.Errorf("no limit refusal: %+v", s.refusals())
	}
	// They end (the origin answers none); the next one goes through.
	release()
	if !waitUntil(5*time.Second, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.serving < 8 }) {
		t.Fatalf("the ended connection is still counted")
	}
	dial()
	if !waitUntil(5*time.Second, func() bool { return accepted.Load() == 9 }) {
		t.Errorf("after one ended, a new connection did not reach the origin (%d)", accepted.Load())
	}
}

// TestLimitRelayed: past maxRelayed connections to hosts in a run, one
// more is refused before any lookup or connection; the origin never sees
// it. Control: the first maxRelayed reach it.
func TestLimitRelayed(t *testing.T) {
	for _, rt := range routes(0) {
		t.Run(rt.name, func(t *testing.T) {
			o := startTestOrigin(t)
			rt := routes(o.port)[map[string]int{"direct": 0, "proxy": 1}[rt.name]]
			s := newServer(testPolicy(t, o.port))
			s.maxRelayed = 5
			hp := fmt.Sprintf("api.test:%d", o.port)
			for i := range 7 {
				exchange(t, func(c *net.TCPConn) { rt.serve(s, c) }, rt.request(hp, fmt.Sprintf("/%d", i), "Connection: close\r\n"), nil)
			}
			conns, _, served := o.settled(t)
			if conns != 5 || len(served) != 5 {
				t.Errorf("the origin accepted %d connections and served %q, want 5", conns, served)
			}
			var n int
			for _, r := range s.refusals() {
				if r.Reason == "limit: 5 connections to hosts in one run" {
					n = r.Count
				}
			}
			if n != 2 {
				t.Errorf("limit refusals counted %d, want 2: %+v", n, s.refusals())
			}
		})
	}
}

// TestLimitHeadParsers: the heads being read at once cost the heap at
// most maxHeadParsers parsers' worth, however many connections send
// heads of short fields (each costs the parser ~25 times its size): the
// heap stays flat. Control: with the parsers unbounded, it does not.
func TestLimitHeadParsers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	peak := func(parsers int) uint64 {
		o := startTestOrigin(t)
		s := newServer(testPolicy(t, o.port))
		s.parsers = make(chan struct{}, parsers)
		s.headTimeout = 5 * time.Second
		addr := serveTest(t, s)
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		head := "GET http://api.test:" + fmt.Sprint(o.port) + "/ HTTP/1.1\r\nHost: api.test\r\n" + strings.Repeat("a:\r\n", 7<<10)
		var conns []net.Conn
		for range 200 {
			c, err := net.Dial("tcp4", addr)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			go io.WriteString(c, head)
		}
		var max uint64
		for range 40 {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if h := m.HeapInuse + m.StackInuse; h > max {
				max = h
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, c := range conns {
			c.Close()
		}
		return max - min(max, base.HeapInuse+base.StackInuse)
	}
	unbounded := peak(1000)
	bounded := peak(maxHeadParsers)
	t.Logf("heap growth with 200 heads of 28 KiB of short fields: %d KiB with %d parsers, %d KiB unbounded", bounded>>10, maxHeadParsers, unbounded>>10)
	if unbounded < 2*bounded {
		t.Skipf("control: unbounded parsers grew the heap by %d KiB only (bounded: %d KiB): this host cannot show the effect", unbounded>>10, bounded>>10)
	}
	if bounded > 24<<20 {
		t.Errorf("the heap grew by %d KiB with %d parsers, want < 24 MiB", bounded>>10, maxHeadParsers)
	}
}

// TestLimitDNS: the DNS hands out at most maxNames addresses (then
// SERVFAIL, counted); a query over TCP over maxDNSQuery bytes closes the
// connection, counted.
func TestLimitDNS(t *testing.T) {
	r, _ := policy.ParseRule("*.wild.test:443")
	s := newServer(&policy.Policy{Rules: []policy.Rule{r}})
	query := func(name string) dnsmessage.RCode {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
		b.StartQuestions()
		b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
		q, _ := b.Finish()
		var p dnsmessage.Parser
		h, err := p.Start(s.answer(q))
		if err != nil {
			t.Fatal(err)
		}
		return h.RCode
	}
	for i := range maxNames {
		if rc := query(fmt.Sprintf("n%d.wild.test.", i)); rc != dnsmessage.RCodeSuccess {
			t.Fatalf("control: name %d: %v", i, rc)
		}
	}
	if rc := query("one-more.wild.test."); rc != dnsmessage.RCodeServerFailure {
		t.Errorf("name %d: %v, want SERVFAIL", maxNames+1, rc)
	}
	if rc := query("n1.wild.test."); rc != dnsmessage.RCodeSuccess {
		t.Errorf("a name already answered: %v", rc)
	}
	if len(s.byName) != maxNames {
		t.Errorf("%d names kept", len(s.byName))
	}
	if !hasRefusal(s.refusals(), "limit: DNS answers for 4096 names") {
		t.Errorf("no limit refusal: %+v", s.refusals())
	}

	got := exchange(t, func(c *net.TCPConn) { s.serveDNSTCP(c) }, "\xff\xff"+strings.Repeat("x", 100), nil)
	if got != "" || !hasRefusal(s.refusals(), "limit: DNS query over 4096 bytes") {
		t.Errorf("a 64 KiB query: read %q, refusals %+v", got, s.refusals())
	}
}

// TestLimitRefusals: the report lists at most maxRefusals distinct
// refusals plus maxLimitRefusals of bounds, hosts and reasons cut; the
// rest is counted.
func TestLimitRefusals(t *testing.T) {
	s := newServer(&policy.Policy{})
	long := strings.Repeat("h", 1<<20)
	for i := range 300 {
		s.refuse(fmt.Sprint(i)+long, 1, "HTTP: Host %s does not match", quoted(fmt.Sprint(i)+long))
		s.refuse("x", 1, "reason %d %s", i, long)
	}
	for i := range 40 {
		s.refuse(fmt.Sprint(i), 2, limitPrefix+"bound %d", i)
	}
	rs := s.refusals()
	limits := 0
	for _, r := range rs {
		if len(r.Host) > maxRefusalHost+3 || len(r.Reason) > maxRefusalReason+3 {
			t.Errorf("not cut: host %d bytes, reason %d", len(r.Host), len(r.Reason))
		}
		if strings.HasPrefix(r.Reason, limitPrefix) {
			limits++
		}
	}
	if len(rs) != maxRefusals+maxLimitRefusals || limits != maxLimitRefusals {
		t.Errorf("%d refusals listed (%d of bounds), want %d+%d", len(rs), limits, maxRefusals, maxLimitRefusals)
	}
	if d := s.report.RefusedDropped; d != 600+40-int64(len(rs)) {
		t.Errorf("dropped %d", d)
	}
}

// rawOrigin accepts connections, records every byte it reads, and
// answers each connection's first read with reply (when not empty).
type rawOrigin struct {
	port  int
	mu    sync.Mutex
	conns int
	raw   []byte
}

func startRawOrigin(t *testing.T, reply []byte) *rawOrigin {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &rawOrigin{port: l.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			o.mu.Lock()
			o.conns++
			o.mu.Unlock()
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				answered := false
				for {
					c.SetReadDeadline(time.Now().Add(5 * time.Second))
					n, err := c.Read(buf)
					o.mu.Lock()
					o.raw = append(o.raw, buf[:n]...)
					o.mu.Unlock()
					if err != nil {
						return
					}
					if !answered && len(reply) > 0 {
						c.Write(reply)
						answered = true
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return o
}

func (o *rawOrigin) seen() (int, []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.conns, append([]byte(nil), o.raw...)
}

// hello builds a ClientHello record whose server_name extension lists
// entries (none: no extension); dup repeats the extension.
type sniEntry struct {
	typ  byte
	name string
}

func hello(dup bool, entries ...sniEntry) []byte {
	var body []byte
	body = append(body, 3, 3)                // legacy_version
	body = append(body, make([]byte, 32)...) // random
	body = append(body, 0)                   // session id
	body = append(body, 0, 2, 0x13, 0x01)    // cipher suites
	body = append(body, 1, 0)                // compression
	var exts []byte
	if len(entries) > 0 {
		var list []byte
		for _, e := range entries {
			list = append(list, e.typ)
			list = binary.BigEndian.AppendUint16(list, uint16(len(e.name)))
			list = append(list, e.name...)
		}
		ext := binary.BigEndian.AppendUint16([]byte{0, 0}, uint16(len(list)+2))
		ext = binary.BigEndian.AppendUint16(ext, uint16(len(list)))
		ext = append(ext, list...)
		exts = append(exts, ext...)
		if dup {
			exts = append(exts, ext...)
		}
	}
	body = binary.BigEndian.AppendUint16(body, uint16(len(exts)))
	body = append(body, exts...)
	msg := append([]byte{handshakeClientHello, 0, byte(len(body) >> 8), byte(len(body))}, body...)
	return append([]byte{recordHandshake, 3, 1, byte(len(msg) >> 8), byte(len(msg))}, msg...)
}

// serverHelloAlert is a TLS alert record: an answer in TLS.
var serverAlert = []byte{recordAlert, 3, 3, 0, 2, 2, 40}

// TestRelayClientHelloServerNames: a ClientHello whose server_name list
// has an entry that is not a host_name, more than one entry, or is
// repeated, is refused before any connection (direct and through
// CONNECT: the origin accepts none). Control: one host_name entry
// naming the name reaches the origin.
func TestRelayClientHelloServerNames(t *testing.T) {
	for _, tc := range []struct {
		name   string
		hello  []byte
		reason string
	}{
		{"one host_name", hello(false, sniEntry{0, "api.test"}), ""},
		{"host_name and type 1", hello(false, sniEntry{0, "api.test"}, sniEntry{1, "evil.test"}), "more than one server_name entry"},
		{"type 1 first", hello(false, sniEntry{1, "evil.test"}, sniEntry{0, "api.test"}), "a server_name entry of type 1"},
		{"two host_names", hello(false, sniEntry{0, "api.test"}, sniEntry{0, "evil.test"}), "more than one server_name entry"},
		{"repeated extension", hello(true, sniEntry{0, "api.test"}), "extension 0 repeated"},
		{"no server_name", hello(false), "without a server name"},
		{"other name", hello(false, sniEntry{0, "evil.test"}), `server name (SNI) "evil.test" does not match`},
	} {
		for _, via := range []string{"direct", "CONNECT"} {
			t.Run(tc.name+"/"+via, func(t *testing.T) {
				o := startRawOrigin(t, serverAlert)
				s := newServer(testPolicy(t, o.port))
				payload := string(tc.hello)
				serve := func(c *net.TCPConn) { s.relay(context.Background(), newClientConn(c), "api.test", o.port, nil) }
				if via == "CONNECT" {
					payload = fmt.Sprintf("CONNECT api.test:%d HTTP/1.1\r\nHost: api.test\r\n\r\n", o.port) + payload
					serve = func(c *net.TCPConn) { s.serveProxy(context.Background(), c) }
				}
				exchange(t, serve, payload, nil)
				time.Sleep(20 * time.Millisecond)
				conns, raw := o.seen()
				if tc.reason == "" {
					if conns != 1 || string(raw) != string(tc.hello) {
						t.Errorf("control: the origin accepted %d connections and read %q, want the hello", conns, raw)
					}
					return
				}
				if conns != 0 {
					t.Errorf("LEAK: the origin accepted %d connections (read %q)", conns, raw)
				}
				if !hasRefusal(s.refusals(), tc.reason) {
					t.Errorf("no refusal %q: %+v", tc.reason, s.refusals())
				}
			})
		}
	}
}

// TestRelayTLSWaitsForServer: after a ClientHello nothing more of the
// client's reaches the host until it answers with TLS; plaintext after
// the hello never reaches it, whether the host does not speak TLS (it
// answers the hello in HTTP) or does. Direct and through CONNECT.
func TestRelayTLSWaitsForServer(t *testing.T) {
	plain := "GET /evil HTTP/1.1\r\nHost: evil.test\r\n\r\n"
	for _, tc := range []struct {
		name   string
		reply  []byte
		reason string
	}{
		{"HTTP host", []byte("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"), "the host did not answer the ClientHello with TLS"},
		{"TLS host", serverAlert, "plaintext after the ClientHello"},
	} {
		for _, via := range []string{"direct", "CONNECT"} {
			t.Run(tc.name+"/"+via, func(t *testing.T) {
				o := startRawOrigin(t, tc.reply)
				s := newServer(testPolicy(t, o.port))
				h := hello(false, sniEntry{0, "api.test"})
				payload := string(h) + plain
				serve := func(c *net.TCPConn) { s.relay(context.Background(), newClientConn(c), "api.test", o.port, nil) }
				if via == "CONNECT" {
					payload = fmt.Sprintf("CONNECT api.test:%d HTTP/1.1\r\nHost: api.test\r\n\r\n", o.port) + payload
					serve = func(c *net.TCPConn) { s.serveProxy(context.Background(), c) }
				}
				exchange(t, serve, payload, nil)
				time.Sleep(20 * time.Millisecond)
				conns, raw := o.seen()
				if conns != 1 || string(raw) != string(h) {
					t.Errorf("the origin accepted %d connections and read %q, want only the hello", conns, raw)
				}
				if !hasRefusal(s.refusals(), tc.reason) {
					t.Errorf("no refusal %q: %+v", tc.reason, s.refusals())
				}
			})
		}
	}
}

// TestRelayHelloRetry: after a HelloRetryRequest the client's second
// ClientHello is checked as the first: another name is refused and never
// reaches the host.
func TestRelayHelloRetry(t *testing.T) {
	hrr := append([]byte{handshakeServerHello, 0, 0, 38, 3, 3}, helloRetryRandom...)
	hrrRecord := append([]byte{recordHandshake, 3, 3, 0, byte(len(hrr))}, hrr...)
	ccs := []byte{recordChangeCipherSpec, 3, 3, 0, 1, 1}
	for _, second := range []string{"api.test", "evil.test"} {
		t.Run(second, func(t *testing.T) {
			o := startRawOrigin(t, hrrRecord)
			s := newServer(testPolicy(t, o.port))
			h1, h2 := hello(false, sniEntry{0, "api.test"}), hello(false, sniEntry{0, second})
			got := exchange(t, func(c *net.TCPConn) { s.relay(context.Background(), newClientConn(c), "api.test", o.port, nil) },
				string(h1), func(c net.Conn, br *bufio.Reader) string {
					rec := make([]byte, len(hrrRecord))
					if _, err := io.ReadFull(br, rec); err != nil {
						return err.Error()
					}
					c.Write(ccs)
					c.Write(h2)
					c.(*net.TCPConn).CloseWrite()
					io.ReadAll(br)
					return "HRR"
				})
			time.Sleep(20 * time.Millisecond)
			_, raw := o.seen()
			if second == "api.test" {
				if want := string(h1) + string(ccs) + string(h2); string(raw) != want || got != "HRR" {
					t.Errorf("control: the origin read %q, want both hellos; client %q", raw, got)
				}
				return
			}
			if strings.Contains(string(raw), "evil") {
				t.Errorf("LEAK: the origin read the second hello %q", raw)
			}
			if !hasRefusal(s.refusals(), `server name (SNI) "evil.test" does not match`) {
				t.Errorf("no refusal: %+v", s.refusals())
			}
		})
	}
}

// TestRelayTLSHandshake: real TLS clients and servers complete their
// handshake through the relay, with and without a HelloRetryRequest
// (the server accepts only P-256, the client sends an X25519 share
// first), directly and through CONNECT.
func TestRelayTLSHandshake(t *testing.T) {
	for _, retry := range []bool{false, true} {
		t.Run(fmt.Sprintf("retry=%v", retry), func(t *testing.T) {
			o := startTLSOrigin(t, retry)
			s := newServer(testPolicy(t, o))
			cfg := &tls.Config{ServerName: "api.test", InsecureSkipVerify: true}
			got := exchange(t, func(c *net.TCPConn) { s.relay(context.Background(), newClientConn(c), "api.test", o, nil) }, "",
				func(c net.Conn, br *bufio.Reader) string {
					tc := tls.Client(c, cfg)
					fmt.Fprintf(tc, "GET /tls HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n")
					b, err := io.ReadAll(tc)
					if err != nil && len(b) == 0 {
						return err.Error()
					}
					return string(b)
				})
			if !strings.Contains(got, "tls ok") {
				t.Errorf("the client got %q; refusals %+v", got, s.refusals())
			}
		})
	}
}

// startTLSOrigin serves HTTPS on 127.0.0.1 ("tls ok"); retry: only P-256
// key shares, so a Go client (X25519 first) gets a HelloRetryRequest.
func startTLSOrigin(t *testing.T, retry bool) int {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls ok") }))
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = l
	srv.TLS = &tls.Config{}
	if retry {
		srv.TLS.CurvePreferences = []tls.CurveID{tls.CurveP256}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return l.Addr().(*net.TCPAddr).Port
}

// TestProxyResponsesBulk: the proxy's absolute-form responses go back as
// the host sent them, on a kept-alive connection: a large body of a known
// length (copied past the buffer), chunked, HEAD, 204, then a body read to
// the connection's end.
func TestProxyResponsesBulk(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 1<<19) // 8 MiB
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Header().Set("Content-Length", fmt.Sprint(len(big)))
			io.WriteString(w, big)
		case "/chunked":
			for i := range 3 {
				fmt.Fprintf(w, "chunk%d;", i)
				w.(http.Flusher).Flush()
			}
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/eof":
			c, brw, _ := http.NewResponseController(w).Hijack()
			brw.WriteString("HTTP/1.0 200 OK\r\n\r\nto the end")
			brw.Flush()
			c.Close()
		default:
			w.Header().Set("Content-Length", "5")
			io.WriteString(w, "head?")
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	s := newServer(testPolicy(t, port))
	hp := fmt.Sprintf("api.test:%d", port)
	var got []string
	exchange(t, func(c *net.TCPConn) { s.serveProxy(context.Background(), c) }, "",
		func(c net.Conn, br *bufio.Reader) string {
			for _, r := range []struct{ method, path string }{{"GET", "/big"}, {"GET", "/chunked"}, {"HEAD", "/head"}, {"GET", "/empty"}, {"GET", "/eof"}} {
				fmt.Fprintf(c, "%s http://%s%s HTTP/1.1\r\nHost: %s\r\n\r\n", r.method, hp, r.path, hp)
				resp, err := http.ReadResponse(br, &http.Request{Method: r.method})
				if err != nil {
					got = append(got, r.path+": "+err.Error())
					break
				}
				b, err := io.ReadAll(resp.Body)
				got = append(got, fmt.Sprintf("%s %d %d %v", r.path, resp.StatusCode, len(b), err))
				if r.path == "/chunked" && string(b) != "chunk0;chunk1;chunk2;" {
					got = append(got, "chunked body "+string(b))
				}
				if r.path == "/big" && string(b) != big {
					got = append(got, "big body differs")
				}
			}
			return ""
		})
	want := []string{"/big 200 8388608 <nil>", "/chunked 200 21 <nil>", "/head 200 0 <nil>", "/empty 204 0 <nil>", "/eof 200 10 <nil>"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
	if s.report.Connections != 1 {
		t.Errorf("%d connections to the host, want 1 (kept alive)", s.report.Connections)
	}
}
