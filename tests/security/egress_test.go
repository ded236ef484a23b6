//go:build integration

package security_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The network allowlist (package egress): a skill granted hosts reaches
// exactly those, through its DNS, its proxy or the synthetic addresses.
// Every server below listens on this host's loopback only; the sandbox
// reaches it solely because --resolve maps the allowed name there. Every
// verdict is the server's own log: what it accepted, with which Host and
// SNI.

// origin is a test server on 127.0.0.1 that logs each request and counts
// the connections it accepts.
type origin struct {
	srv   *httptest.Server
	port  int
	mu    sync.Mutex
	conns int
	// open counts the connections open now, peak the most open at once
	// since resetPeak (base were open then), closed those closed since.
	open, peak, base, closed int
	log                      []string // "METHOD PATH host=HOST sni=SNI"
	// streamed counts the chunks /stream wrote; streamEnd is "" while it
	// runs, then "complete" or the write error that stopped it.
	streamed  int
	streamEnd string
	// hold ends the requests /hold holds.
	hold chan struct{}
}

func startOrigin(p *P, useTLS bool) *origin {
	p.Helper()
	o := &origin{hold: make(chan struct{})}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sni := ""
		if r.TLS != nil {
			sni = r.TLS.ServerName
		}
		o.mu.Lock()
		o.log = append(o.log, fmt.Sprintf("%s %s host=%s sni=%s", r.Method, r.URL.Path, r.Host, sni))
		o.mu.Unlock()
		if r.URL.Path == "/hold" {
			// Held without an answer until the client goes or the test ends.
			select {
			case <-r.Context().Done():
			case <-o.hold:
			}
			return
		}
		if r.URL.Path == "/stream" {
			// A transfer that lasts: the helper is killed during it.
			rc := http.NewResponseController(w)
			end := "complete"
			for i := 0; i < 600; i++ {
				_, err := w.Write([]byte(strings.Repeat("x", 1024) + "\n"))
				if err == nil {
					err = rc.Flush()
				}
				if err != nil {
					end = "broken: " + err.Error()
					break
				}
				o.mu.Lock()
				o.streamed++
				o.mu.Unlock()
				time.Sleep(50 * time.Millisecond)
			}
			o.mu.Lock()
			o.streamEnd = end
			o.mu.Unlock()
			return
		}
		fmt.Fprintf(w, "origin says hello to %s", r.URL.Path)
	}))
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		p.Fatalf("%v", err)
	}
	s.Listener = l
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		o.mu.Lock()
		defer o.mu.Unlock()
		switch st {
		case http.StateNew:
			o.conns++
			o.open++
			o.peak = max(o.peak, o.open)
		case http.StateClosed, http.StateHijacked:
			o.open--
			o.closed++
		}
	}
	if useTLS {
		s.StartTLS()
	} else {
		s.Start()
	}
	p.Cleanup(func() { close(o.hold); s.Close() })
	o.srv, o.port = s, l.Addr().(*net.TCPAddr).Port
	return o
}

// stream reports /stream's progress.
func (o *origin) stream() (chunks int, end string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.streamed, o.streamEnd
}

// resetPeak starts counting the peak of open connections (and the
// closes) anew.
func (o *origin) resetPeak() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.peak, o.base, o.closed = o.open, o.open, 0
}

// openPeak is the most connections opened since resetPeak open at once
// (those open before it not counted), and how many closed since.
func (o *origin) openPeak() (peak, closed int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.peak - o.base, o.closed
}

func (o *origin) seen() (int, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.conns, append([]string(nil), o.log...)
}

// egressPy runs the steps of REQ["steps"], each recorded under its key:
// resolve NAME; get URL (urllib: honours the proxy variables); raw HOST
// PORT [tls SNI] [host HOSTHEADER] [method M] (a client that ignores
// them); proxy "REQUEST" (a raw request to the proxy); udp HOST PORT
// [hex PAYLOAD]; unix ADDR (@ for abstract); sock FAMILY TYPE (create a
// socket); cas (CA certificates the default TLS context loads).
const egressPy = `
import ssl, urllib.request
CTX = ssl.create_default_context()
CTX.check_hostname = False
CTX.verify_mode = ssl.CERT_NONE
def first_line(data):
    return data.split(b"\r\n")[0].decode("latin-1") if data else "closed without data"
def read_all(s):
    data = b""
    while True:
        try:
            b = s.recv(65536)
        except (ConnectionResetError, ssl.SSLError) as e:
            if data: break
            raise
        if not b: break
        data += b
    return data
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5, context=CTX if url.startswith("https") else None) as r:
            return "%d %s" % (r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        return "%d %s" % (e.code, e.read().decode())
def raw(st):
    s = socket.create_connection((st["host"], st["port"]), timeout=5)
    if "sni" in st:
        s = CTX.wrap_socket(s, server_hostname=st["sni"])
    hosthdr = st.get("hosthdr", "%s:%d" % (st["host"], st["port"]))
    s.sendall(("%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (st.get("method", "GET"), st.get("path", "/raw"), hosthdr)).encode())
    return first_line(read_all(s))
def proxy(req):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    s.sendall(req.encode())
    return first_line(read_all(s))
def udp(host, port, payload=b"hello"):
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1)
    for _ in range(3):
        s.sendto(payload, (host, port))
    return "sent"
def unix(addr):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect("\0" + addr[1:] if addr.startswith("@") else addr)
    s.sendall(b"hello")
    return "connected"
def dnsq(name, qtype=1):
    # A raw query to the sandbox's DNS (odd names a resolver library refuses).
    q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
    for label in name:
        q += bytes([len(label)]) + label
    q += b"\x00" + qtype.to_bytes(2, "big") + b"\x00\x01"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(q, ("127.0.0.1", 53))
    r = s.recv(1500)
    return "rcode %d answers %d" % (r[3] & 15, int.from_bytes(r[6:8], "big"))
for st in REQ["steps"]:
    k = st["key"]
    kind = st["kind"]
    if kind == "resolve":
        attempt(k, lambda st=st: sorted({a[4][0] for a in socket.getaddrinfo(st["name"], 80, type=socket.SOCK_STREAM)}))
    elif kind == "get":
        attempt(k, lambda st=st: get(st["url"]))
    elif kind == "raw":
        attempt(k, lambda st=st: raw(st))
    elif kind == "proxy":
        attempt(k, lambda st=st: proxy(st["req"]))
    elif kind == "udp":
        attempt(k, lambda st=st: udp(st["host"], st["port"], bytes.fromhex(st.get("hex", "68656c6c6f"))))
    elif kind == "unix":
        attempt(k, lambda st=st: unix(st["addr"]))
    elif kind == "dns":
        attempt(k, lambda st=st: dnsq([bytes.fromhex(l) for l in st["labels"]], st.get("qtype", 1)))
    elif kind == "cas":
        attempt(k, lambda: ssl.create_default_context().cert_store_stats()["x509_ca"])
    elif kind == "sock":
        attempt(k, lambda st=st: socket.socket(st["family"], st["type"]).close())
done()
`

// unresolved reports whether a probe's getaddrinfo failed (gaierror's
// errno is negative: EAI_NONAME and the like).
func unresolved(v string) bool {
	return strings.HasPrefix(v, "errno -") || strings.HasPrefix(v, "error gaierror")
}

type step map[string]any

func steps(s ...step) string { return mustJSON(map[string]any{"steps": s}) }

// egressResult is the result's network section.
type egressResult struct {
	Network *struct {
		Mode        string   `json:"mode"`
		Hosts       []string `json:"hosts"`
		Connections int64    `json:"connections"`
		Refused     []struct {
			Host   string `json:"host"`
			Port   int    `json:"port"`
			Reason string `json:"reason"`
		} `json:"refused"`
	} `json:"network"`
}

func (o *outcome) network(p *P) *egressResult {
	p.Helper()
	var r egressResult
	if err := json.Unmarshal([]byte(o.stdout), &r); err != nil || r.Network == nil {
		p.Fatalf("the result has no network section\n%s", o)
	}
	return &r
}

// refusedFor reports whether the host side recorded a refusal of host
// (and port, when not 0) whose reason contains reason.
func (r *egressResult) refusedFor(host string, port int, reason string) bool {
	for _, f := range r.Network.Refused {
		if f.Host == host && (port == 0 || f.Port == port) && strings.Contains(f.Reason, reason) {
			return true
		}
	}
	return false
}

// TestEgressAllowed: an allowed name is reached through the proxy
// variables (HTTP and HTTPS CONNECT) and by a client that ignores them
// (plain and TLS to the synthetic address DNS gave it), each proven by
// the server's log with the right Host and SNI.
func TestEgressAllowed(t *testing.T) {
	probe(t, "net/egress-allowed", func(p *P, m *mode) {
		plain, tls := startOrigin(p, false), startOrigin(p, true)
		hp, ht := fmt.Sprintf("api.test:%d", plain.port), fmt.Sprintf("api.test:%d", tls.port)
		sk := pyProbe(p, m, "eg-ok", egressPy, fmt.Sprintf("network:\n  hosts: [%q, %q]\n", hp, ht))
		o := m.skill(p, sk, steps(
			step{"key": "resolve", "kind": "resolve", "name": "api.test"},
			step{"key": "proxy http", "kind": "get", "url": "http://" + hp + "/via-proxy"},
			step{"key": "proxy https", "kind": "get", "url": "https://" + ht + "/via-connect"},
			step{"key": "direct http", "kind": "raw", "host": "api.test", "port": plain.port, "path": "/direct"},
			step{"key": "direct https", "kind": "raw", "host": "api.test", "port": tls.port, "path": "/direct-tls", "sni": "api.test"},
			step{"key": "proxy smuggled host", "kind": "proxy", "req": "GET http://" + hp + "/smuggled HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n"},
			step{"key": "cas", "kind": "cas"},
		), "--network", "allow", "--resolve", hp+":127.0.0.1", "--resolve", ht+":127.0.0.1")
		o.wantCode(p, 0)
		out := o.out(p)
		// HTTPS clients can verify the hosts they reach: the host's CA
		// certificates are there (a functional check, not a security one).
		if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil {
			if v := str(out, "cas"); v == "0" || strings.HasPrefix(v, "error") || strings.HasPrefix(v, "errno") || v == "<missing>" {
				p.Errorf("the sandbox's default TLS context loads no CA certificate (%s): /etc/ssl is not there", v)
			}
		}
		if v := str(out, "resolve"); !strings.Contains(v, "198.1") {
			p.Errorf("api.test did not resolve to a synthetic address: %s", v)
		}
		_, plog := plain.seen()
		_, tlog := tls.seen()
		for _, want := range []struct {
			log       []string
			line, key string
		}{
			{plog, "GET /via-proxy host=" + hp + " sni=", "proxy http"},
			{plog, "GET /direct host=" + hp + " sni=", "direct http"},
			{tlog, "GET /via-connect host=" + ht + " sni=api.test", "proxy https"},
			{tlog, "GET /direct-tls host=" + ht + " sni=api.test", "direct https"},
		} {
			found := false
			for _, l := range want.log {
				found = found || l == want.line
			}
			if !found {
				p.Errorf("%s: the server did not log %q (it logged %q); the probe saw %s", want.key, want.line, want.log, str(out, want.key))
			}
			if !strings.HasPrefix(str(out, want.key), "200") && !strings.HasPrefix(str(out, want.key), "HTTP/1.1 200") {
				p.Errorf("%s: the probe got %s", want.key, str(out, want.key))
			}
		}
		// A proxy request's Host header is replaced by its URL's host
		// (RFC 9112 3.2.2): the origin never sees evil.test.
		if want := "GET /smuggled host=" + hp + " sni="; !slices.Contains(plog, want) {
			p.Errorf("proxy smuggled host: the server logged %q, want %q", plog, want)
		}
		for _, l := range append(plog, tlog...) {
			if strings.Contains(l, "evil") {
				p.Errorf("LEAK: the server saw %q", l)
			}
		}
		r := o.network(p)
		if r.Network.Mode != "allowlist" || len(r.Network.Hosts) != 2 || r.Network.Connections < 5 {
			p.Errorf("network section: %+v", r.Network)
		}
	})
}

// TestEgressRefused: what the allowlist does not name reaches nothing:
// the servers (one allowed by name and port, one on a port not granted)
// accept no connection at all, and the host side reports each refusal.
func TestEgressRefused(t *testing.T) {
	probe(t, "net/egress-refused", func(p *P, m *mode) {
		plain, tls, other := startOrigin(p, false), startOrigin(p, true), startOrigin(p, false)
		nu, portU := udpListener(p, "127.0.0.1:0")
		hp, ht := fmt.Sprintf("api.test:%d", plain.port), fmt.Sprintf("api.test:%d", tls.port)
		lh := fmt.Sprintf("localhost:%d", plain.port)
		long := hex.EncodeToString([]byte(strings.Repeat("a", 63)))
		api, test := hex.EncodeToString([]byte("api")), hex.EncodeToString([]byte("test"))
		sk := pyProbe(p, m, "eg-no", egressPy, fmt.Sprintf("network:\n  hosts: [%q, %q, %q]\n", hp, ht, lh))
		st := []step{
			{"key": "dns other", "kind": "resolve", "name": "other.test"},
			{"key": "dns suffix", "kind": "resolve", "name": "api.test.evil.test"},
			{"key": "dns long", "kind": "dns", "labels": []string{long, long, long, api, test}},
			{"key": "dns odd", "kind": "dns", "labels": []string{"61006222ff2e", api, test}},
			{"key": "dns aaaa", "kind": "dns", "labels": []string{api, test}, "qtype": 28},
			{"key": "proxy other", "kind": "get", "url": fmt.Sprintf("http://other.test:%d/", plain.port)},
			{"key": "proxy ip", "kind": "proxy", "req": fmt.Sprintf("CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", plain.port)},
			{"key": "proxy internal", "kind": "proxy", "req": fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", lh, lh)},
			{"key": "proxy port", "kind": "proxy", "req": fmt.Sprintf("CONNECT api.test:%d HTTP/1.1\r\nHost: api.test\r\n\r\n", other.port)},
			{"key": "direct ip", "kind": "raw", "host": "127.0.0.1", "port": plain.port},
			{"key": "direct unassigned", "kind": "raw", "host": "198.18.99.99", "port": plain.port},
			{"key": "direct port", "kind": "raw", "host": "api.test", "port": other.port},
			{"key": "direct host mismatch", "kind": "raw", "host": "api.test", "port": plain.port, "hosthdr": "evil.test"},
			{"key": "direct chaining", "kind": "raw", "host": "api.test", "port": plain.port, "method": "CONNECT", "path": "other.test:443", "hosthdr": hp},
			{"key": "sni mismatch", "kind": "raw", "host": "api.test", "port": tls.port, "sni": "evil.test"},
			{"key": "no sni", "kind": "raw", "host": "api.test", "port": tls.port, "sni": nil},
			{"key": "ipv6", "kind": "raw", "host": "::1", "port": plain.port},
			{"key": "udp host", "kind": "udp", "host": "127.0.0.1", "port": portU},
			{"key": "udp synthetic", "kind": "udp", "host": "198.18.0.2", "port": portU},
			{"key": "AF_VSOCK", "kind": "sock", "family": 40, "type": 1},
			{"key": "AF_INET SOCK_RAW", "kind": "sock", "family": 2, "type": 3},
			{"key": "AF_PACKET", "kind": "sock", "family": 17, "type": 3},
		}
		for _, h := range hostIPs() {
			st = append(st, step{"key": "direct host " + h, "kind": "raw", "host": h, "port": plain.port})
		}
		o := m.skill(p, sk, steps(st...), "--network", "allow", "--resolve", hp+":127.0.0.1", "--resolve", ht+":127.0.0.1")
		o.wantCode(p, 0)
		out := o.out(p)
		time.Sleep(200 * time.Millisecond)
		for name, srv := range map[string]*origin{"allowed plain": plain, "allowed TLS": tls, "other port": other} {
			if n, log := srv.seen(); n != 0 {
				p.Errorf("LEAK: the %s server on 127.0.0.1:%d accepted %d connections: %q", name, srv.port, n, log)
			}
		}
		if n := nu.Load(); n != 0 {
			p.Errorf("LEAK: the UDP listener on 127.0.0.1:%d received %d datagrams", portU, n)
		}
		for _, k := range []string{"dns other", "dns suffix"} {
			if v := str(out, k); !unresolved(v) {
				p.Errorf("%s resolved: %s", k, v)
			}
		}
		if v := str(out, "dns long"); v != "rcode 3 answers 0" {
			p.Errorf("dns long: %s, want NXDOMAIN", v)
		}
		// A label with NUL and 0xff bytes is not a query the parser
		// accepts: FORMERR or NXDOMAIN, never an answer.
		if v := str(out, "dns odd"); v != "rcode 3 answers 0" && v != "rcode 1 answers 0" {
			p.Errorf("dns odd: %s, want NXDOMAIN or FORMERR", v)
		}
		if v := str(out, "dns aaaa"); v != "rcode 0 answers 0" {
			p.Errorf("AAAA api.test: %s, want no address", v)
		}
		for _, k := range []string{"proxy ip", "proxy port"} {
			if v := str(out, k); !strings.HasPrefix(v, "HTTP/1.1 403") {
				p.Errorf("%s: %s, want 403", k, v)
			}
		}
		if v := str(out, "proxy internal"); !strings.HasPrefix(v, "HTTP/1.1 502") {
			p.Errorf("proxy internal: %s, want 502 (localhost resolves to loopback)", v)
		}
		if v := str(out, "proxy other"); !strings.Contains(v, "403") {
			p.Errorf("proxy other: %s, want 403", v)
		}
		for _, k := range []string{"AF_VSOCK", "AF_INET SOCK_RAW", "AF_PACKET"} {
			if v := str(out, k); !strings.HasPrefix(v, "errno") {
				p.Errorf("LEAK: socket %s: %s", k, v)
			}
		}
		for k, v := range out {
			if s := fmt.Sprint(v); strings.HasPrefix(k, "direct") || k == "sni mismatch" || k == "no sni" || k == "ipv6" {
				if strings.Contains(s, "HTTP/1.1 200") || strings.Contains(s, "origin says") {
					p.Errorf("LEAK: %s got an answer: %s", k, s)
				}
			}
		}
		r := o.network(p)
		for _, want := range []struct {
			host   string
			port   int
			reason string
		}{
			{"other.test", 0, "DNS: name not allowed"},
			{"api.test.evil.test", 0, "DNS: name not allowed"},
			{"127.0.0.1", plain.port, "IP address"},
			{"localhost", plain.port, "non-public address 127.0.0.1"},
			{"api.test", other.port, "not allowed"},
			{"api.test", plain.port, `Host "evil.test" does not match`},
			{"api.test", plain.port, "proxy chaining"},
			{"api.test", tls.port, `(SNI) "evil.test" does not match`},
			{"api.test", tls.port, "without a server name"},
			{"198.18.99.99", plain.port, "not given out"},
		} {
			if !r.refusedFor(want.host, want.port, want.reason) {
				p.Errorf("the result does not report the refusal of %s:%d (%s): %+v", want.host, want.port, want.reason, r.Network.Refused)
			}
		}
	})
}

// TestEgressWildcard: "*.wild.test" allows names under wild.test, not
// wild.test itself nor a name that merely ends with it.
func TestEgressWildcard(t *testing.T) {
	probe(t, "net/egress-wildcard", func(p *P, m *mode) {
		srv := startOrigin(p, false)
		port := srv.port
		sk := pyProbe(p, m, "eg-wild", egressPy, fmt.Sprintf("network:\n  hosts: [\"*.wild.test:%d\"]\n", port))
		o := m.skill(p, sk, steps(
			step{"key": "a", "kind": "raw", "host": "a.wild.test", "port": port, "path": "/a"},
			step{"key": "b.c", "kind": "raw", "host": "b.c.wild.test", "port": port, "path": "/bc"},
			step{"key": "apex", "kind": "resolve", "name": "wild.test"},
			step{"key": "suffix", "kind": "resolve", "name": "a.wild.test.evil.test"},
			step{"key": "glued", "kind": "resolve", "name": "evilwild.test"},
			step{"key": "unmapped", "kind": "raw", "host": "u.wild.test", "port": port, "path": "/u"},
		), "--network", "allow",
			"--resolve", fmt.Sprintf("a.wild.test:%d:127.0.0.1", port), "--resolve", fmt.Sprintf("b.c.wild.test:%d:127.0.0.1", port))
		o.wantCode(p, 0)
		out := o.out(p)
		_, log := srv.seen()
		want := []string{fmt.Sprintf("GET /a host=a.wild.test:%d sni=", port), fmt.Sprintf("GET /bc host=b.c.wild.test:%d sni=", port)}
		if strings.Join(log, "|") != strings.Join(want, "|") {
			p.Errorf("the server logged %q, want %q (probe: a=%s b.c=%s unmapped=%s)", log, want, str(out, "a"), str(out, "b.c"), str(out, "unmapped"))
		}
		for _, k := range []string{"apex", "suffix", "glued"} {
			if v := str(out, k); !unresolved(v) {
				p.Errorf("%s resolved: %s", k, v)
			}
		}
		r := o.network(p)
		for _, h := range []string{"wild.test", "a.wild.test.evil.test", "evilwild.test"} {
			if !r.refusedFor(h, 0, "DNS") {
				p.Errorf("no DNS refusal reported for %s: %+v", h, r.Network.Refused)
			}
		}
		// u.wild.test is allowed by the pattern but not mapped: the host
		// looks it up (no such name here) and refuses.
		if !r.refusedFor("u.wild.test", port, "") {
			p.Errorf("no refusal reported for the unmapped u.wild.test: %+v", r.Network.Refused)
		}
	})
}

// TestEgressConcurrent: many connections at once through the synthetic
// address and the proxy all reach the allowed server, each counted by it.
// 2Gi of memory: rootless without cgroups that is RLIMIT_AS, and 40
// threads reserve 8 MiB stacks and glibc malloc arenas of 64 MiB.
func TestEgressConcurrent(t *testing.T) {
	probe(t, "net/egress-concurrent", func(p *P, m *mode) {
		srv := startOrigin(p, false)
		hp := fmt.Sprintf("api.test:%d", srv.port)
		sk := pyProbe(p, m, "eg-many", `
import threading, urllib.request
res = {}
def one(i):
    try:
        if i % 2:
            with urllib.request.urlopen("http://%s/p%d" % (REQ["hp"], i), timeout=10) as r:
                res[i] = r.status
        else:
            s = socket.create_connection(("api.test", REQ["port"]), timeout=10)
            s.sendall(("GET /d%d HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (i, REQ["hp"])).encode())
            data = b""
            while True:
                b = s.recv(65536)
                if not b: break
                data += b
            res[i] = int(data.split(b" ")[1])
    except Exception as e:
        res[i] = repr(e)
ts = [threading.Thread(target=one, args=(i,)) for i in range(40)]
for t in ts: t.start()
for t in ts: t.join()
OUT["ok"] = sum(1 for v in res.values() if v == 200)
OUT["errors"] = [v for v in res.values() if v != 200][:5]
done()
`, fmt.Sprintf("network:\n  hosts: [%q]\nlimits:\n  pids: 128\n  memory: 2Gi\n", hp))
		o := m.skill(p, sk, mustJSON(map[string]any{"hp": hp, "port": srv.port}), "--network", "allow", "--resolve", hp+":127.0.0.1")
		o.wantCode(p, 0)
		out := o.out(p)
		n, log := srv.seen()
		if fmt.Sprint(out["ok"]) != "40" || len(log) != 40 || n != 40 {
			p.Errorf("40 concurrent requests: the probe saw %v ok (errors %v); the server accepted %d connections and logged %d requests", out["ok"], out["errors"], n, len(log))
		}
	})
}

// egressKillPy streams /stream from api.test (DNS, synthetic address),
// then, once the stream ends, tries to reach the host again for a few
// seconds (the synthetic address it had, the proxy, a new lookup) and
// holds on a little so the host can look at its network namespace.
// Input {"quick": true} returns at once (the clean-up run).
const egressKillPy = `
if REQ.get("quick"):
    done()
    sys.exit(0)
PORT = %d
addr = socket.getaddrinfo("api.test", PORT, type=socket.SOCK_STREAM)[0][4][0]
OUT["addr"] = addr
s = socket.create_connection((addr, PORT), timeout=30)
s.sendall(("GET /stream HTTP/1.1\r\nHost: api.test:%%d\r\nConnection: close\r\n\r\n" %% PORT).encode())
got = 0
try:
    while True:
        b = s.recv(65536)
        if not b: break
        got += len(b)
except OSError as e:
    OUT["stream error"] = repr(e)
OUT["stream bytes"] = got
def again(i):
    attempt("again %%d synthetic" %% i, lambda: socket.create_connection((addr, PORT), timeout=1).close())
    attempt("again %%d proxy" %% i, lambda: socket.create_connection(("127.0.0.1", 3128), timeout=1).close())
    attempt("again %%d lookup" %% i, lambda: socket.getaddrinfo("api.test", PORT, type=socket.SOCK_STREAM)[0][4][0])
for i in range(6):
    again(i)
    time.sleep(0.4)
time.sleep(4)
done()
`

// netnsListeners counts, in the network namespace of pid, the listening
// TCP sockets and the UDP sockets bound to port 53: what the egress
// server serves. ok is false when the files cannot be read (pid gone).
func netnsListeners(pid int) (n int, ok bool) {
	for _, f := range []string{"tcp", "tcp6", "udp", "udp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			return 0, false
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fl := strings.Fields(line)
			if len(fl) < 4 {
				continue
			}
			switch {
			case strings.HasPrefix(f, "tcp") && fl[3] == "0A":
				n++
			case strings.HasPrefix(f, "udp") && strings.HasSuffix(fl[1], ":0035"):
				n++
			}
		}
	}
	return n, true
}

// sandboxNetPid is a process of the sandbox in a network namespace other
// than the host's, or 0.
func sandboxNetPid(sk *skill, m *mode) int {
	hostNet, _ := os.Readlink("/proc/self/ns/net")
	for _, pi := range sandboxProcs(sk, m) {
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pi.pid)); err == nil && ns != hostNet {
			return pi.pid
		}
	}
	return 0
}

func waitFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// unixSocketsUnder lists the host's bound unix sockets whose path holds
// any of the substrings.
func unixSocketsUnder(subs ...string) []string {
	b, _ := os.ReadFile("/proc/net/unix")
	var found []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		fl := strings.Fields(line)
		if len(fl) < 8 {
			continue
		}
		for _, s := range subs {
			if strings.Contains(fl[7], s) {
				found = append(found, fl[7])
				break
			}
		}
	}
	return found
}

// killMidTransfer is the check both egress-kill probes share, run in
// skillrun's during hook: once the sandbox streams from the origin, it
// looks at the sandbox's network namespace (the egress sockets are
// there), SIGKILLs the process victim finds, and then proves from the
// host that the transfer stopped, that nothing listens in the sandbox
// any more and, once the sandbox is gone, that the origin never accepted
// another connection (the probe kept trying for seconds).
func killMidTransfer(p *P, m *mode, sk *skill, o *origin, what string, victim func() int) {
	if !waitFor(30*time.Second, func() bool { n, _ := o.stream(); return n >= 5 }) {
		n, end := o.stream()
		p.Errorf("the stream never got going (%d chunks, end %q)", n, end)
		return
	}
	pid := sandboxNetPid(sk, m)
	if pid == 0 {
		p.Errorf("no sandbox process in a network namespace of its own")
		return
	}
	if n, ok := netnsListeners(pid); !ok || n == 0 {
		p.Errorf("sanity: the sandbox's network namespace shows no egress socket before the kill (%d, readable %v): the check after it would prove nothing", n, ok)
	}
	var vpid int
	waitFor(5*time.Second, func() bool { vpid = victim(); return vpid != 0 })
	if vpid == 0 {
		p.Errorf("no %s process found to kill", what)
		return
	}
	if err := syscall.Kill(vpid, syscall.SIGKILL); err != nil {
		p.Errorf("kill %s %d: %v", what, vpid, err)
		return
	}
	atKill, _ := o.stream()
	p.Logf("SIGKILLed %s (pid %d) after %d chunks", what, vpid, atKill)
	waitFor(10*time.Second, func() bool { _, end := o.stream(); return end != "" })
	if n, end := o.stream(); !strings.HasPrefix(end, "broken") {
		p.Errorf("LEAK: the transfer did not stop when the %s died: %d chunks (%d at the kill), end %q", what, n, atKill, end)
	}
	if n, ok := netnsListeners(pid); ok && n != 0 {
		p.Errorf("LEAK: %d egress sockets still listen in the sandbox's network namespace after the %s died", n, what)
	}
	if !waitFor(30*time.Second, func() bool { return len(sandboxProcs(sk, m)) == 0 }) {
		p.Errorf("the sandbox did not end within 30s of the kill")
	}
	if n, log := o.seen(); n != 1 {
		p.Errorf("LEAK: after the %s died the origin accepted %d connections in all, want only the stream's: %q", what, n, log)
	}
}

// TestEgressKilledMidTransfer: `skill run`, which serves the sandbox's
// egress, is SIGKILLed during a transfer. The transfer stops, nothing
// listens in the sandbox any more and the probe's further attempts reach
// nothing (the origin's own counts); the next run in the same TMPDIR
// clears what the killed one left (container, bundle folder and its
// handoff socket), and nothing at all remains.
func TestEgressKilledMidTransfer(t *testing.T) {
	probe(t, "net/egress-killed", func(p *P, m *mode) {
		o := startOrigin(p, false)
		hp := fmt.Sprintf("api.test:%d", o.port)
		sk := pyProbe(p, m, "eg-kill", fmt.Sprintf(egressKillPy, o.port), fmt.Sprintf("network:\n  hosts: [%q]\n", hp))
		flags := []string{"--network", "allow", "--resolve", hp + ":127.0.0.1"}
		tmp := m.tempDir(p)
		victim := func() int {
			for _, pi := range scanProcs() {
				if strings.HasPrefix(pi.cmdline, m.bin+" skill run ") && strings.Contains(pi.cmdline, sk.dir) {
					return pi.pid
				}
			}
			return 0
		}
		killed := m.run(p, sk, runOpts{input: "{}", flags: flags, tmp: tmp, killed: true,
			during: func() { killMidTransfer(p, m, sk, o, "skill run", victim) }})
		if killed.code != -1 && killed.code != 137 {
			p.Errorf("skill run was not killed: exit %d", killed.code)
		}
		// The next run in the same TMPDIR clears what the killed one left.
		again := m.run(p, sk, runOpts{input: `{"quick": true}`, flags: flags, tmp: tmp})
		again.wantCode(p, 0)
		if s := unixSocketsUnder(tmp, sk.name); len(s) > 0 {
			p.Errorf("LEFTOVER unix sockets: %v", s)
		}
		if left, _ := filepath.Glob(filepath.Join(tmp, "skillrun-egress-*")); len(left) > 0 {
			p.Errorf("LEFTOVER handoff folders: %v", left)
		}
	})
}

// TestEgressHelperKilledMidTransfer: the annotation route (`skill bundle`
// writes the annotations, `skillrun run` serves them with a detached
// __skillrun-egress-helper); the helper is SIGKILLed during a transfer.
// Same host-side proofs: the transfer stops, nothing listens in the
// sandbox, the origin sees no new connection; then `run` ends and no
// helper, handoff folder or socket, state or mount remains.
func TestEgressHelperKilledMidTransfer(t *testing.T) {
	probe(t, "net/egress-helper-killed", func(p *P, m *mode) {
		o := startOrigin(p, false)
		hp := fmt.Sprintf("api.test:%d", o.port)
		sk := pyProbe(p, m, "eg-hkill", fmt.Sprintf(egressKillPy, o.port), fmt.Sprintf("network:\n  hosts: [%q]\n", hp))
		out := filepath.Join(sk.base, "bundle")
		if err := os.Mkdir(out, 0o755); err != nil {
			p.Fatalf("%v", err)
		}
		if m.rootless() {
			os.Chown(out, m.uid, m.gid)
		}
		m.run(p, sk, runOpts{args: []string{"skill", "bundle", "-o", out, "--network", "allow", "--resolve", hp + ":127.0.0.1", sk.dir}}).wantCode(p, 0)
		tmp := m.tempDir(p)
		helperFor := func() []procInfo {
			var hs []procInfo
			for _, pi := range scanProcs() {
				if strings.Contains(pi.cmdline, "__skillrun-egress-helper") && strings.Contains(pi.cmdline, hp) {
					hs = append(hs, pi)
				}
			}
			return hs
		}
		victim := func() int {
			if hs := helperFor(); len(hs) == 1 {
				return hs[0].pid
			}
			return 0
		}
		res := m.run(p, sk, runOpts{args: []string{"run", "--bundle", out, sk.name}, tmp: tmp,
			during: func() { killMidTransfer(p, m, sk, o, "egress helper", victim) }})
		p.Logf("run exited %d (the probe's own verdict, not evidence)", res.code)
		if hs := helperFor(); len(hs) > 0 {
			p.Errorf("LEFTOVER egress helpers: %+v", hs)
		}
		if s := unixSocketsUnder(tmp, "skillrun-egress-"+sk.name); len(s) > 0 {
			p.Errorf("LEFTOVER unix sockets: %v", s)
		}
		if left, _ := filepath.Glob(filepath.Join(tmp, "skillrun-egress-*")); len(left) > 0 {
			p.Errorf("LEFTOVER handoff folders: %v", left)
		}
	})
}

// quicInitial is a datagram shaped like a QUIC v1 Initial: long header,
// version 1, an 8-byte DCID, padded to 1200 bytes as clients send it.
var quicInitial = "c300000001" + "08" + "0011223344556677" + "00" + "00" + "449e" + strings.Repeat("00", 1200-18)

// TestEgressSideChannels: with the allowlist on (and working: an allowed
// request reaches the origin), what is not TCP to a granted name reaches
// nothing on the host: TCP and UDP to an origin listening on [::1] (on
// the allowed port number too), a QUIC-shaped datagram to the allowed
// name's port (its synthetic address, 127.0.0.1 and ::1, where UDP
// listeners wait on that port), unix sockets of the host, abstract and by
// path. Every verdict is a host listener's count.
func TestEgressSideChannels(t *testing.T) {
	probe(t, "net/egress-side-channels", func(p *P, m *mode) {
		plain := startOrigin(p, false)
		port := plain.port
		hp := fmt.Sprintf("api.test:%d", port)
		// IPv6 loopback origins: one on the allowed port number, one on
		// a port of its own.
		var six []*atomic.Int64
		six6 := map[string]int{}
		for _, a := range []string{fmt.Sprintf("[::1]:%d", port), "[::1]:0"} {
			if n, pt := tcpListener(p, "tcp6", a); n != nil {
				six = append(six, n)
				six6[a] = pt
			}
		}
		if len(six) == 0 {
			p.Logf("no IPv6 loopback on this host: the IPv6 steps only prove that connecting fails")
		}
		udp4, _ := udpListener(p, fmt.Sprintf("127.0.0.1:%d", port))
		var udp6 *atomic.Int64
		if c, err := net.ListenPacket("udp6", fmt.Sprintf("[::1]:%d", port)); err == nil {
			c.Close()
			udp6, _ = udpListener(p, fmt.Sprintf("[::1]:%d", port))
		}
		abstract := "@skillrun-sec-" + randHex(6)
		nAbs := unixListener(p, abstract)
		dir, err := os.MkdirTemp("", "skillrun-sec-unix-")
		if err != nil {
			p.Fatalf("%v", err)
		}
		p.Cleanup(func() { os.RemoveAll(dir) })
		os.Chmod(dir, 0o777)
		path := filepath.Join(dir, "s")
		nPath := unixListener(p, path)

		sk := pyProbe(p, m, "eg-side", egressPy, fmt.Sprintf("network:\n  hosts: [%q]\n", hp))
		st := []step{
			{"key": "allowed", "kind": "raw", "host": "api.test", "port": port, "path": "/allowed"},
			{"key": "quic synthetic", "kind": "udp", "host": "api.test", "port": port, "hex": quicInitial},
			{"key": "quic v4", "kind": "udp", "host": "127.0.0.1", "port": port, "hex": quicInitial},
			{"key": "quic v6", "kind": "udp", "host": "::1", "port": port, "hex": quicInitial},
			{"key": "unix abstract", "kind": "unix", "addr": abstract},
			{"key": "unix path", "kind": "unix", "addr": path},
		}
		for a, pt := range six6 {
			st = append(st, step{"key": fmt.Sprintf("ipv6 %s port %d", a, pt), "kind": "raw", "host": "::1", "port": pt, "hosthdr": hp})
		}
		o := m.skill(p, sk, steps(st...), "--network", "allow", "--resolve", hp+":127.0.0.1")
		o.wantCode(p, 0)
		out := o.out(p)
		time.Sleep(300 * time.Millisecond)
		// The allowlist was on and working in this run.
		if _, log := plain.seen(); !slices.Contains(log, "GET /allowed host="+hp+" sni=") {
			p.Errorf("the allowed request did not reach the origin (log %q, probe %s): the other steps prove nothing", log, str(out, "allowed"))
		}
		for i, n := range six {
			if v := n.Load(); v != 0 {
				p.Errorf("LEAK: the IPv6 loopback origin %d accepted %d connections", i, v)
			}
		}
		if v := udp4.Load(); v != 0 {
			p.Errorf("LEAK: the UDP listener on 127.0.0.1:%d received %d datagrams", port, v)
		}
		if udp6 != nil {
			if v := udp6.Load(); v != 0 {
				p.Errorf("LEAK: the UDP listener on [::1]:%d received %d datagrams", port, v)
			}
		}
		if v := nAbs.Load(); v != 0 {
			p.Errorf("LEAK: the abstract unix socket %s accepted %d connections", abstract, v)
		}
		if v := nPath.Load(); v != 0 {
			p.Errorf("LEAK: the unix socket %s accepted %d connections", path, v)
		}
		if n, _ := plain.seen(); n != 1 {
			p.Errorf("the allowed origin accepted %d connections, want 1", n)
		}
	})
}
