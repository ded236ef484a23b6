package egress

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillrun/skillrun/egress/policy"
)

// The relay's checks, each judged by what a test origin on 127.0.0.1
// received (the bytes it read, the requests it served), never by what
// the client saw.

// testOrigin is an HTTP server on 127.0.0.1 that records every byte it
// reads and every request it serves. /upgrade switches to an echo when
// asked (Upgrade: websocket and ?switch=1) and answers 200 otherwise.
type testOrigin struct {
	port   int
	mu     sync.Mutex
	conns  int
	closed int
	raw    bytes.Buffer
	served []string // "METHOD PATH host=HOST ua=UA upgrade=UPGRADE"
}

type recordingConn struct {
	net.Conn
	o *testOrigin
}

func (c recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.o.mu.Lock()
	c.o.raw.Write(p[:n])
	c.o.mu.Unlock()
	return n, err
}

type recordingListener struct {
	net.Listener
	o *testOrigin
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.o.mu.Lock()
	l.o.conns++
	l.o.mu.Unlock()
	return recordingConn{c, l.o}, nil
}

func startTestOrigin(t *testing.T) *testOrigin {
	t.Helper()
	o := &testOrigin{}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ua := "-"
		if v, ok := r.Header["User-Agent"]; ok {
			ua = strings.Join(v, ",")
		}
		o.mu.Lock()
		o.served = append(o.served, fmt.Sprintf("%s %s host=%s ua=%s upgrade=%s", r.Method, r.URL.Path, r.Host, ua, r.Header.Get("Upgrade")))
		o.mu.Unlock()
		if r.URL.Path == "/upgrade" && r.Header.Get("Upgrade") == "websocket" && r.URL.Query().Get("switch") == "1" {
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			brw.Flush()
			io.Copy(c, brw) // echo
			return
		}
		fmt.Fprintf(w, "origin %s", r.URL.Path)
	}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				o.mu.Lock()
				o.closed++
				o.mu.Unlock()
			}
		},
	}
	go srv.Serve(recordingListener{l, o})
	t.Cleanup(func() { srv.Close() })
	o.port = l.Addr().(*net.TCPAddr).Port
	return o
}

// settled waits until the origin has closed every connection it
// accepted (so it has read all it was sent), then returns what it saw.
func (o *testOrigin) settled(t *testing.T) (conns int, raw string, served []string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		o.mu.Lock()
		done := o.closed >= o.conns
		o.mu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.conns, o.raw.String(), append([]string(nil), o.served...)
}

// testPolicy allows api.test on the origin's port and maps it to
// 127.0.0.1.
func testPolicy(t *testing.T, port int) *policy.Policy {
	t.Helper()
	r, err := policy.ParseRule(fmt.Sprintf("api.test:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	return &policy.Policy{Rules: []policy.Rule{r}, Resolve: map[string]netip.Addr{fmt.Sprintf("api.test:%d", port): netip.MustParseAddr("127.0.0.1")}}
}

// exchange serves one connection with serve (the sandbox's side of it),
// sends payload from a client, half-closes unless keepOpen, and returns
// what the client read until the server side closed.
func exchange(t *testing.T, serve func(c *net.TCPConn), payload string, then func(c net.Conn, br *bufio.Reader) string) string {
	t.Helper()
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := l.AcceptTCP()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	c, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, payload); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var got string
	if then != nil {
		got = then(c, br)
	} else {
		c.(*net.TCPConn).CloseWrite()
		b, _ := io.ReadAll(br)
		got = string(b)
	}
	c.Close()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay did not return")
	}
	return got
}

func (s *server) refusals() []Refusal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Refusal(nil), s.report.Refused...)
}

func hasRefusal(rs []Refusal, reason string) bool {
	for _, r := range rs {
		if strings.Contains(r.Reason, reason) {
			return true
		}
	}
	return false
}

// TestRelayRefusesWhatIsNeitherTLSNorHTTP: whatever starts a connection
// to an allowed address must be a ClientHello or an HTTP request whose
// Host names the address's name; leading empty lines do not hide a
// request from the check (the bypass: "\r\nGET / ... Host: evil.test"
// was passed raw). Direct (synthetic address) and through a CONNECT
// tunnel of the proxy.
func TestRelayRefusesWhatIsNeitherTLSNorHTTP(t *testing.T) {
	evil := "GET /evil HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n"
	for _, tc := range []struct {
		name, payload, reason string
	}{
		{"CRLF then other host", "\r\n" + evil, `Host "evil.test" does not match`},
		{"LF then other host", "\n\n" + evil, `Host "evil.test" does not match`},
		{"many empty lines", strings.Repeat("\r\n", 20) + evil, "empty lines"},
		{"NUL", "\x00" + evil, "neither TLS nor HTTP (first byte 0x00)"},
		{"space", " " + evil, "neither TLS nor HTTP (first byte 0x20)"},
		{"digit", "1" + evil, "neither TLS nor HTTP (first byte 0x31)"},
		{"binary", "\x80\x01\x02" + evil, "neither TLS nor HTTP (first byte 0x80)"},
		{"SSH banner", "SSH-2.0-OpenSSH_9.6\r\n" + evil, "HTTP: unreadable request"},
		{"SSH banner as a request line", "SSH-2.0-x /evil HTTP/1.1\r\nHost: evil.test\r\n\r\n", `Host "evil.test" does not match`},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", `Host "" does not match`},
		{"TLS record, not a hello", "\x16\x03\x01\x00\x05hello" + evil, "TLS: handshake message of type 104, not a ClientHello"},
	} {
		for _, route := range []string{"direct", "CONNECT"} {
			t.Run(tc.name+"/"+route, func(t *testing.T) {
				o := startTestOrigin(t)
				s := newServer(testPolicy(t, o.port))
				ctx := context.Background()
				payload := tc.payload
				serve := func(c *net.TCPConn) { s.relay(ctx, newClientConn(c), "api.test", o.port, nil) }
				if route == "CONNECT" {
					payload = fmt.Sprintf("CONNECT api.test:%d HTTP/1.1\r\nHost: api.test:%d\r\n\r\n", o.port, o.port) + payload
					serve = func(c *net.TCPConn) { s.serveProxy(ctx, c) }
				}
				got := exchange(t, serve, payload, nil)
				conns, raw, served := o.settled(t)
				if len(served) != 0 || strings.Contains(raw, "evil") {
					t.Errorf("LEAK: the origin served %q and read %q", served, raw)
				}
				if raw != "" {
					t.Errorf("the origin read %q, want nothing", raw)
				}
				if route == "direct" && conns != 0 {
					t.Errorf("the origin accepted %d connections, want none", conns)
				}
				if !hasRefusal(s.refusals(), tc.reason) {
					t.Errorf("no refusal %q: %+v (client read %q)", tc.reason, s.refusals(), got)
				}
			})
		}
	}
}

// TestRelayLeadingEmptyLines: a request after empty lines still goes
// through, checked, written anew (without the empty lines, without a
// User-Agent the client did not send).
func TestRelayLeadingEmptyLines(t *testing.T) {
	o := startTestOrigin(t)
	s := newServer(testPolicy(t, o.port))
	hp := fmt.Sprintf("api.test:%d", o.port)
	got := exchange(t, func(c *net.TCPConn) { s.relay(context.Background(), newClientConn(c), "api.test", o.port, nil) },
		"\r\n\r\nGET /ok HTTP/1.1\r\nHost: "+hp+"\r\nConnection: close\r\n\r\n", nil)
	_, raw, served := o.settled(t)
	if want := []string{"GET /ok host=" + hp + " ua=- upgrade="}; strings.Join(served, "|") != strings.Join(want, "|") {
		t.Errorf("the origin served %q, want %q", served, want)
	}
	if !strings.HasPrefix(raw, "GET /ok HTTP/1.1\r\n") {
		t.Errorf("the origin read %q, want the request without the empty lines", raw)
	}
	if !strings.Contains(got, "origin /ok") {
		t.Errorf("the client read %q", got)
	}
	if r := s.refusals(); len(r) != 0 {
		t.Errorf("refusals: %+v", r)
	}
}

// TestRelayUpgradeWaitsFor101: a request that asks for an upgrade the
// origin does not grant leaves the connection HTTP: a pipelined request
// for another host is refused, never passed raw.
func TestRelayUpgradeWaitsFor101(t *testing.T) {
	for _, route := range []string{"direct", "CONNECT"} {
		t.Run(route, func(t *testing.T) {
			o := startTestOrigin(t)
			s := newServer(testPolicy(t, o.port))
			ctx := context.Background()
			hp := fmt.Sprintf("api.test:%d", o.port)
			payload := "GET /upgrade HTTP/1.1\r\nHost: " + hp + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n" +
				"GET /second HTTP/1.1\r\nHost: evil.test\r\n\r\n"
			serve := func(c *net.TCPConn) { s.relay(ctx, newClientConn(c), "api.test", o.port, nil) }
			if route == "CONNECT" {
				payload = "CONNECT " + hp + " HTTP/1.1\r\nHost: " + hp + "\r\n\r\n" + payload
				serve = func(c *net.TCPConn) { s.serveProxy(ctx, c) }
			}
			got := exchange(t, serve, payload, nil)
			_, raw, served := o.settled(t)
			if want := "GET /upgrade host=" + hp + " ua=- upgrade=websocket"; strings.Join(served, "|") != want {
				t.Errorf("the origin served %q, want only %q", served, want)
			}
			if strings.Contains(raw, "evil") || strings.Contains(raw, "/second") {
				t.Errorf("LEAK: the origin read %q", raw)
			}
			if !hasRefusal(s.refusals(), `Host "evil.test" does not match`) {
				t.Errorf("no refusal of the second request: %+v", s.refusals())
			}
			if !strings.Contains(got, "origin /upgrade") {
				t.Errorf("the client did not get the first answer: %q", got)
			}
		})
	}
}

// TestRelayUpgradeSwitched: after the origin's 101 the connection is the
// new protocol's, both ways.
func TestRelayUpgradeSwitched(t *testing.T) {
	o := startTestOrigin(t)
	s := newServer(testPolicy(t, o.port))
	hp := fmt.Sprintf("api.test:%d", o.port)
	got := exchange(t, func(c *net.TCPConn) { s.relay(context.Background(), newClientConn(c), "api.test", o.port, nil) },
		"GET /upgrade?switch=1 HTTP/1.1\r\nHost: "+hp+"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
		func(c net.Conn, br *bufio.Reader) string {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return "error " + err.Error()
			}
			if resp.StatusCode != 101 {
				return resp.Status
			}
			io.WriteString(c, "ping after the switch\n")
			line, err := br.ReadString('\n')
			if err != nil {
				return "error " + err.Error()
			}
			return "101 " + line
		})
	if got != "101 ping after the switch\n" {
		t.Errorf("the client got %q, want the 101 and the echo", got)
	}
	_, raw, _ := o.settled(t)
	if !strings.Contains(raw, "ping after the switch") {
		t.Errorf("the origin did not read the bytes after the switch: %q", raw)
	}
}

// TestRelayPipelined: every request of a kept-alive connection is
// checked; an h2c upgrade is not asked of the origin; nothing is added.
func TestRelayPipelined(t *testing.T) {
	o := startTestOrigin(t)
	s := newServer(testPolicy(t, o.port))
	hp := fmt.Sprintf("api.test:%d", o.port)
	got := exchange(t, func(c *net.TCPConn) { s.relay(context.Background(), newClientConn(c), "api.test", o.port, nil) },
		"GET /a HTTP/1.1\r\nHost: "+hp+"\r\nUser-Agent: probe/1\r\n\r\n"+
			"GET /h2c HTTP/1.1\r\nHost: "+hp+"\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n"+
			"HEAD /b HTTP/1.1\r\nHost: "+hp+"\r\n\r\n"+
			"GET /c HTTP/1.1\r\nHost: evil.test\r\n\r\n", nil)
	_, raw, served := o.settled(t)
	want := []string{
		"GET /a host=" + hp + " ua=probe/1 upgrade=",
		"GET /h2c host=" + hp + " ua=- upgrade=",
		"HEAD /b host=" + hp + " ua=- upgrade=",
	}
	if strings.Join(served, "|") != strings.Join(want, "|") {
		t.Errorf("the origin served %q, want %q", served, want)
	}
	if strings.Contains(raw, "evil") || strings.Contains(strings.ToLower(raw), "http2-settings") || strings.Contains(strings.ToLower(raw), "upgrade") {
		t.Errorf("the origin read %q", raw)
	}
	if strings.Count(got, "HTTP/1.1 200") != 3 {
		t.Errorf("the client got %q, want three answers", got)
	}
	if !hasRefusal(s.refusals(), `Host "evil.test" does not match`) {
		t.Errorf("no refusal of /c: %+v", s.refusals())
	}
}

// TestProxyNoAddedUserAgent: the proxy's absolute-form requests reach the
// origin without a User-Agent the client did not send.
func TestProxyNoAddedUserAgent(t *testing.T) {
	o := startTestOrigin(t)
	s := newServer(testPolicy(t, o.port))
	hp := fmt.Sprintf("api.test:%d", o.port)
	exchange(t, func(c *net.TCPConn) { s.serveProxy(context.Background(), c) },
		"GET http://"+hp+"/p HTTP/1.1\r\nHost: "+hp+"\r\nConnection: close\r\n\r\n", nil)
	_, _, served := o.settled(t)
	if want := "GET /p host=" + hp + " ua=- upgrade="; strings.Join(served, "|") != want {
		t.Errorf("the origin served %q, want %q", served, want)
	}
}

// TestTargetOK: only request targets an origin reads as the same request
// pass (the fuzz target found "A A:0", written upstream as "A 0").
func TestTargetOK(t *testing.T) {
	for _, c := range []struct {
		line string
		ok   bool
	}{
		{"GET / HTTP/1.1", true},
		{"GET //x?q=1 HTTP/1.1", true},
		{"GET http://api.test:8080/x HTTP/1.1", true},
		{"OPTIONS * HTTP/1.1", true},
		{"GET * HTTP/1.1", false},
		{"A A:0 HTTP/1.1", false},
		{"GET https://api.test:8080/x HTTP/1.1", false},
		{"GET ftp://api.test:8080/x HTTP/1.1", false},
		{"GET http://user@api.test:8080/x HTTP/1.1", false},
		{"GET mailto:a@b HTTP/1.1", false},
	} {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(c.line + "\r\nHost: api.test:8080\r\n\r\n")))
		if err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		if got := targetOK(req); got != c.ok {
			t.Errorf("targetOK(%s) = %v, want %v", c.line, got, c.ok)
		}
	}
}
