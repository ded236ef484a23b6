//go:build integration

package security_test

import (
	"bytes"
	"context"
	bin "encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/tests/internal/hostcheck"
)

// What a skill can make the host side of the network allowlist spend
// (egress/limits.go, docs/security.md "What the host side spends"), each
// judged from the host: the runner's own peak RSS (VmHWM of the
// `skill run` process, read from /proc while it runs), the result's size,
// the origin's own accept count and log, the bytes a raw origin read.

// Documented bounds the probes check against.
const (
	// rssBound: the runner's peak RSS under an attack, above its peak
	// when idle.
	rssBound = 64 << 20
	// resultMargin: a result exceeds the output limit by at most this
	// (network section 64 KiB, stderr tail and the fixed fields).
	resultMargin   = 96 << 10
	openConnsBound = 256
	relayedBound   = 4096
)

// netResult is the result's network section, with counts.
type netResult struct {
	Network *struct {
		Hosts       []string `json:"hosts"`
		Connections int64    `json:"connections"`
		Refused     []struct {
			Host   string `json:"host"`
			Port   int    `json:"port"`
			Reason string `json:"reason"`
			Count  int    `json:"count"`
		} `json:"refused"`
		RefusedDropped int64 `json:"refused_dropped"`
	} `json:"network"`
}

func (o *outcome) netResult(p *P) *netResult {
	p.Helper()
	var r netResult
	if err := json.Unmarshal([]byte(o.stdout), &r); err != nil || r.Network == nil {
		p.Fatalf("the result has no network section\n%s", o)
	}
	return &r
}

// refusals counts the refusals whose host (when not "") and reason
// (substring) match.
func (r *netResult) refusals(host, reason string) int {
	n := 0
	for _, f := range r.Network.Refused {
		if (host == "" || f.Host == host) && strings.Contains(f.Reason, reason) {
			n += f.Count
		}
	}
	return n
}

// hwm samples the peak RSS (VmHWM) of the `skill run` process running
// sk, from the host, until stop; found is false when no such process was
// seen (the measure then proves nothing).
type hwm struct {
	stop  chan struct{}
	done  chan struct{}
	peak  int64
	found bool
}

func sampleHWM(sk *skill) *hwm {
	h := &hwm{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		pid := 0
		for {
			if pid == 0 {
				for _, pi := range scanProcs() {
					if strings.HasPrefix(pi.cmdline, binary+" skill run ") && strings.Contains(pi.cmdline, sk.dir) {
						pid = pi.pid
						break
					}
				}
			}
			if pid != 0 {
				if v := statusKiB(pid, "VmHWM:"); v > 0 {
					h.found = true
					if v<<10 > h.peak {
						h.peak = v << 10
					}
				}
			}
			select {
			case <-h.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return h
}

func (h *hwm) Stop() { close(h.stop); <-h.done }

// statusKiB reads a "Field: N kB" line of /proc/PID/status.
func statusKiB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// floodPy is the attacks of TestEgressFlood, chosen by REQ["attack"],
// each after the control (one request to /control, directly and through
// the proxy): "none"; "host-headers" (four requests, two direct and two
// through the proxy, each with a 16 MiB Host header); "second-header"
// (a kept-alive connection, direct and through the proxy: a request,
// then a second one with a 160 MiB header); "trickle" (the same, the
// second head sent a byte at a time over 13 s); "held" (4
// processes hold 1000 connections each, every one with a request to
// /hold, until all four have tried theirs, then 3 s more: none closes
// while another is being opened, so the origin's accepts are the
// connections open at once).
const floodPy = `
import threading
P = REQ["port"]
HP = "api.test:%d" % P
ADDR = socket.gethostbyname("api.test")
def conn(via):
    if via == "direct":
        return socket.create_connection((ADDR, P), timeout=30)
    return socket.create_connection(("127.0.0.1", 3128), timeout=30)
def target(via, path):
    return path if via == "direct" else "http://%s%s" % (HP, path)
def response(s):
    f = s.makefile("rb")
    status = f.readline().decode("latin-1").strip()
    n = 0
    while True:
        h = f.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        if h.lower().startswith(b"content-length:"):
            n = int(h.split(b":")[1])
    f.read(n)
    return status or "closed"
def send_big(s, prefix, n, suffix):
    chunk = b"a" * (1 << 20)
    sent = 0
    try:
        s.sendall(prefix)
        while sent < n:
            s.sendall(chunk)
            sent += len(chunk)
        s.sendall(suffix)
    except OSError as e:
        return "refused after %d MiB (%s)" % (sent >> 20, e.strerror)
    try:
        return "sent all, then " + response(s)
    except OSError as e:
        return "sent all, then %s" % e.strerror
def control(via):
    s = conn(via)
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (target(via, "/control"), HP)).encode())
    return response(s)
for via in ("direct", "proxy"):
    attempt("control " + via, lambda via=via: control(via))
A = REQ["attack"]
def host_headers(via, i):
    s = conn(via)
    return send_big(s, ("GET %s HTTP/1.1\r\nHost: " % target(via, "/big%d" % i)).encode(), 16 << 20, b"\r\n\r\n")
def second(via, how):
    s = conn(via)
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target(via, "/first"), HP)).encode())
    first = response(s)
    head = ("GET %s HTTP/1.1\r\nHost: %s\r\nX-Big: " % (target(via, "/second" if how == "big" else "/trickled"), HP)).encode()
    if how == "big":
        return first + "; second: " + send_big(s, head, 160 << 20, b"\r\n\r\n")
    start = time.time()
    whole = head + b"x\r\n\r\n"
    try:
        for b in whole:
            s.sendall(bytes([b]))
            time.sleep(13.0 / len(whole))
        s.settimeout(16 - (time.time() - start))
        got = s.recv(1)
        return first + "; trickled: %s after %.1fs" % ("closed" if not got else "answered", time.time() - start)
    except OSError as e:
        return first + "; trickled: %s after %.1fs" % (e.strerror or e, time.time() - start)
def held(nproc, per):
    # Every child holds what it got until all have tried all theirs: no
    # connection closes while others are still being opened, so what the
    # origin accepted in all is what was open at once.
    tried_r, tried_w = os.pipe()
    go_r, go_w = os.pipe()
    pids = []
    for i in range(nproc):
        pid = os.fork()
        if pid == 0:
            os.close(tried_r)
            os.close(go_w)
            socks = []
            for j in range(per):
                try:
                    s = socket.create_connection((ADDR, P), timeout=10)
                    s.sendall(("GET /hold HTTP/1.1\r\nHost: %s\r\n\r\n" % HP).encode())
                    socks.append(s)
                except OSError:
                    pass
            os.write(tried_w, b"x")
            os.read(go_r, 1)
            os._exit(0)
        pids.append(pid)
    os.close(tried_w)
    os.close(go_r)
    tried = 0
    while tried < nproc and os.read(tried_r, 1):
        tried += 1
    time.sleep(3)
    os.close(go_w)
    for pid in pids:
        os.waitpid(pid, 0)
    return "held %d x %d" % (nproc, per)
def run(jobs):
    ts = [threading.Thread(target=lambda k=k, f=f: attempt(k, f)) for k, f in jobs]
    for t in ts: t.start()
    for t in ts: t.join()
if A == "host-headers":
    run([("%s %d" % (via, i), lambda via=via, i=i: host_headers(via, i)) for via in ("direct", "proxy") for i in range(2)])
elif A == "second-header":
    run([(via, lambda via=via: second(via, "big")) for via in ("direct", "proxy")])
elif A == "trickle":
    run([(via, lambda via=via: second(via, "trickle")) for via in ("direct", "proxy")])
elif A == "held":
    attempt("held", lambda: held(4, 1000))
done()
`

// floodAttacks are the attacks of floodPy, each measured against "none".
var floodAttacks = []string{"host-headers", "second-header", "trickle", "held"}

// flood is the origin and the skill of TestEgressFlood and
// TestEgressFloodMCP, and the host-side checks of each run of floodPy.
type flood struct {
	o        *origin
	hp       string
	sk       *skill
	flags    []string // the grants: --network allow and the origin's address
	controls int      // control requests the origin must have logged
	// The origin's accept count and log before the current run.
	before    int
	logBefore []string
}

func newFlood(p *P, m *mode) *flood {
	p.Helper()
	f := &flood{o: startOrigin(p, false)}
	f.hp = fmt.Sprintf("api.test:%d", f.o.port)
	f.sk = pyProbe(p, m, "eg-flood", floodPy, fmt.Sprintf("network:\n  hosts: [%q]\nlimits:\n  memory: 1Gi\n  pids: 128\n  timeout: 60s\n", f.hp))
	f.flags = []string{"--network", "allow", "--resolve", f.hp + ":127.0.0.1"}
	return f
}

// input is the skill's input for attack; called before each run.
func (f *flood) input(attack string) map[string]any {
	f.before, f.logBefore = f.o.seen()
	f.o.resetPeak()
	return map[string]any{"attack": attack, "port": f.o.port}
}

// control checks one run of attack whose result is out (skill run's
// stdout, or mcp serve's structuredContent): both control requests
// reached the origin (else the run proves nothing), and the result is
// within the output limit plus the margin. It returns the probe's output.
func (f *flood) control(p *P, attack string, out *outcome) map[string]any {
	p.Helper()
	v := out.out(p)
	f.controls += 2
	_, log := f.o.seen()
	n := 0
	for _, l := range log {
		if strings.HasPrefix(l, "GET /control host="+f.hp) {
			n++
		}
	}
	if n != f.controls || !strings.HasPrefix(str(v, "control direct"), "HTTP/1.1 200") || !strings.HasPrefix(str(v, "control proxy"), "HTTP/1.1 200") {
		p.Fatalf("control (%s): the origin logged %d of the %d control requests (probe: %s, %s): the attack proves nothing", attack, n, f.controls, str(v, "control direct"), str(v, "control proxy"))
	}
	if len(out.stdout) > 1<<20+resultMargin {
		p.Errorf("%s: the result is %d bytes, over the 1 MiB output limit + %d", attack, len(out.stdout), resultMargin)
	}
	return v
}

// attack checks a run of attack (after control): nothing past a bound
// reached the origin, and the result reports the bound's refusals.
// sweep runs the idle case, then every attack, through run (a run of
// who: skill run, or one call of a long-lived mcp serve) and judges each
// attack's peak RSS against the idle one's, then its other effects.
func (f *flood) sweep(p *P, who string, run func(attack string) (*outcome, map[string]any, int64)) {
	_, _, idle := run("none")
	p.Logf("%s peak RSS, idle (controls only): %s", who, mib(idle))
	for _, attack := range floodAttacks {
		out, v, peak := run(attack)
		p.Logf("%s peak RSS under %s: %s (idle %s, +%s); probe %v", who, attack, mib(peak), mib(idle), mib(peak-idle), v)
		if peak-idle > rssBound {
			p.Errorf("LEAK: under %s the %s process's peak RSS grew by %s over idle (%s), bound %s", attack, who, mib(peak-idle), mib(idle), mib(rssBound))
		}
		f.attack(p, attack, out, v)
	}
}

func (f *flood) attack(p *P, attack string, out *outcome, v map[string]any) {
	p.Helper()
	r := out.netResult(p)
	conns, log := f.o.seen()
	for _, l := range log[len(f.logBefore):] {
		for _, bad := range []string{"/big", "/second", "/trickled"} {
			if strings.Contains(l, bad) {
				p.Errorf("LEAK: %s: the origin served %q", attack, l)
			}
		}
	}
	switch attack {
	case "host-headers", "second-header":
		for _, host := range []string{"api.test", "127.0.0.1"} {
			if r.refusals(host, "limit: request head over") == 0 {
				p.Errorf("%s: no head-size refusal for %s: %+v", attack, host, r.Network.Refused)
			}
		}
	case "trickle":
		for _, host := range []string{"api.test", "127.0.0.1"} {
			if r.refusals(host, "limit: request head not complete within 10s") == 0 {
				p.Errorf("trickle: no head-deadline refusal for %s: %+v", host, r.Network.Refused)
			}
		}
	case "held":
		// The bound is on the connections open at once: the origin's
		// peak of open connections (the controls' ended before the flood:
		// they ask the origin to close). How many it accepted in all and
		// saw closed meanwhile is said too: the children hold theirs until
		// all have tried, so a close during the flood is not the skill's.
		peak, closed := f.o.openPeak()
		got := conns - f.before - 2
		p.Logf("held: the origin accepted %d connections in all, %d open at once at most, %d closed during the run", got, peak, closed)
		if peak > openConnsBound {
			p.Errorf("LEAK: the origin had %d of the 4000 held connections open at once, bound %d (%d accepted in all, %d closed during the run)", peak, openConnsBound, got, closed)
		} else if peak < openConnsBound {
			p.Skipf("skipped: the origin had only %d held connections open at once (< %d): the bound was not reached here (probe: %s)", peak, openConnsBound, str(v, "held"))
		}
		if r.refusals("", "limit: 256 connections open at once") == 0 {
			p.Errorf("held: no open-connections refusal: %+v", r.Network.Refused)
		}
	}
}

// TestEgressFlood: whatever the skill sends, the runner's own memory
// stays flat and nothing past a bound reaches the origin. Each attack is
// a run of its own, measured against an idle run (the controls only):
// huge Host headers on four requests, a 160 MiB second header on a
// kept-alive connection, a second header trickled past the head
// deadline, 4000 held connections (direct and through the proxy where it
// applies). The host-side control of each run: both control requests
// reached the origin, and the sampler read the runner's VmHWM.
func TestEgressFlood(t *testing.T) {
	probe(t, "net/egress-flood", func(p *P, m *mode) {
		f := newFlood(p, m)
		run := func(attack string) (*outcome, map[string]any, int64) {
			in := mustJSON(f.input(attack))
			h := sampleHWM(f.sk)
			out := m.run(p, f.sk, runOpts{input: in, flags: f.flags, timeout: 90 * time.Second})
			h.Stop()
			if !h.found {
				p.Skipf("skipped: the host could not read the skill run process's VmHWM from /proc (%s)", attack)
			}
			out.wantCode(p, 0)
			return out, f.control(p, attack, out), h.peak
		}
		f.sweep(p, "skill run", run)
	})
}

// TestEgressFloodMCP: the same attacks through one long-lived `mcp serve`
// (stdio, the MCP SDK's client), one tools/call of the flood skill each,
// idle first: the server's own memory stays flat too. VmHWM is the
// server's peak over its whole life, read from /proc after each call (the
// largest reading so far is the peak so far): each attack's
// reading minus the idle one, taken after the idle call and before any
// attack, is what the attacks added to the server's peak. The host-side
// controls are TestEgressFlood's, on the tool result's structuredContent
// (the same result as skill run's); and the host read the server's VmHWM.
func TestEgressFloodMCP(t *testing.T) {
	probe(t, "net/egress-flood-mcp", func(p *P, m *mode) {
		f := newFlood(p, m)
		tmp := m.tempDir(p)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := m.command(ctx, tmp, nil, append([]string{"mcp", "serve", "--no-commands", "--skills", f.sk.dir}, f.flags...)...)
		stderr := &lockedBuffer{}
		cmd.Stderr = stderr
		c := mcp.NewClient(&mcp.Implementation{Name: "skillrun-security", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			p.Fatalf("connect to mcp serve: %v\nstderr: %s", err, stderr)
		}
		var closeOnce sync.Once
		stop := func() {
			closeOnce.Do(func() {
				// Closing stdin ends the server (and waits for it).
				if err := cs.Close(); err != nil {
					p.Logf("close: %v", err)
				}
			})
		}
		p.Cleanup(func() {
			stop()
			if p.Failed() {
				p.Logf("mcp serve stderr:\n%s", stderr)
			}
		})
		// The server itself: the process started (unshare and sh exec it),
		// or as the test user runuser's child. Not any process whose
		// command line matches: the server's own forks (the runtime's, to
		// start a container) bear its command line until they exec.
		pid := 0
		for _, pi := range scanProcs() {
			if (pi.pid == cmd.Process.Pid || pi.ppid == cmd.Process.Pid) && strings.HasPrefix(pi.cmdline, m.bin+" mcp serve ") {
				pid = pi.pid
				break
			}
		}
		// The same process throughout: its pid and start time.
		server, _ := hostcheck.ProcIDOf(pid)
		last := int64(0)
		hwm := func(when string) int64 {
			v := statusKiB(pid, "VmHWM:") << 10
			if pid == 0 || v == 0 {
				p.Skipf("skipped: the host could not read the mcp serve process's VmHWM from /proc (%s)", when)
			}
			if !server.Alive() {
				p.Fatalf("process %d is no longer the mcp serve process read at the start (%s): the measure proves nothing", pid, when)
			}
			// VmHWM may read a little lower later: the kernel records the
			// high-water mark lazily, and memory the Go runtime returns
			// (madvise) lowers the RSS it falls back on. The peak so far
			// is the largest reading.
			last = max(last, v)
			return last
		}
		p.Logf("mcp serve peak RSS after initialize: %s", mib(hwm("start")))
		call := func(attack string) (*outcome, map[string]any, int64) {
			args := f.input(attack)
			cctx, ccancel := context.WithTimeout(ctx, 90*time.Second)
			defer ccancel()
			r, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: f.sk.name, Arguments: args})
			peak := hwm(attack)
			if err != nil {
				p.Fatalf("tools/call %s (%s): %v", f.sk.name, attack, err)
			}
			out := &outcome{argv: []string{"mcp serve: tools/call", f.sk.name, attack}}
			if r.StructuredContent != nil {
				b, _ := json.Marshal(r.StructuredContent)
				out.stdout = string(b)
				out.parsed = json.Unmarshal(b, &out.res) == nil
			}
			for _, x := range r.Content {
				if tc, ok := x.(*mcp.TextContent); ok {
					out.stderr += tc.Text
				}
			}
			p.Logf("%s", out)
			for _, cn := range []string{envCanary, hostCanary} {
				if strings.Contains(out.all(), cn) {
					p.Errorf("LEAK: the caller's canary %q (environment or hostname) appears in the tool result\n%s", cn, out)
				}
			}
			if r.IsError || !out.res.OK {
				p.Fatalf("tools/call %s: a tool error (structuredContent ok %v)\n%s", attack, out.res.OK, out)
			}
			return out, f.control(p, attack, out), peak
		}
		f.sweep(p, "mcp serve", call)
		stop()
		m.assertNoLeftovers(p, f.sk, tmp)
	})
}

// lockedBuffer is a bytes.Buffer safe for a process's writes and the
// test's reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(b)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestEgressResultSize: refusals cannot grow the result past the output
// limit plus the documented margin: 60 requests with distinct 30 KiB
// Host headers, then 300 DNS queries for distinct 250-byte names full of
// characters JSON escapes, on top of 200 KiB of output (limit 256 KiB).
// Control: the allowed request reached the origin and the refusals were
// recorded (listed and dropped).
func TestEgressResultSize(t *testing.T) {
	probe(t, "net/egress-result-size", func(p *P, m *mode) {
		o := startOrigin(p, false)
		hp := fmt.Sprintf("api.test:%d", o.port)
		sk := pyProbe(p, m, "eg-size", `
P = REQ["port"]
ADDR = socket.gethostbyname("api.test")
s = socket.create_connection((ADDR, P), timeout=10)
s.sendall(("GET /control HTTP/1.1\r\nHost: api.test:%d\r\nConnection: close\r\n\r\n" % P).encode())
while s.recv(65536): pass
sent = 0
for i in range(60):
    try:
        s = socket.create_connection((ADDR, P), timeout=10)
        s.sendall(("GET / HTTP/1.1\r\nHost: %03d%s\r\n\r\n" % (i, '"' * (30 << 10))).encode())
        s.recv(1)
        sent += 1
    except OSError:
        pass
q = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
q.settimeout(1)
for i in range(300):
    labels = [("%03d" % i + '"\\' * 30).encode(), ('"' * 63).encode(), ("\\" * 63).encode(), ("<&>" * 20).encode()]
    msg = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + b"".join(bytes([len(l)]) + l for l in labels) + b"\x00\x00\x01\x00\x01"
    q.sendto(msg, ("127.0.0.1", 53))
    try:
        q.recv(1500)
    except OSError:
        pass
OUT["sent"] = sent
OUT["pad"] = "x" * (200 << 10)
done()
`, fmt.Sprintf("network:\n  hosts: [%q]\nlimits:\n  output: 256Ki\n  timeout: 60s\n", hp))
		out := m.run(p, sk, runOpts{input: mustJSON(map[string]any{"port": o.port}), flags: []string{"--network", "allow", "--resolve", hp + ":127.0.0.1"}, timeout: 90 * time.Second})
		out.wantCode(p, 0)
		if _, log := o.seen(); len(log) != 1 || !strings.HasPrefix(log[0], "GET /control") {
			p.Fatalf("control: the origin logged %q, want the control request only", log)
		}
		r := out.netResult(p)
		listed := len(r.Network.Refused)
		if listed < 50 || r.Network.RefusedDropped < 100 {
			p.Fatalf("control: %d refusals listed and %d dropped: the flood did not happen (probe sent %v)", listed, r.Network.RefusedDropped, out.out(p)["sent"])
		}
		var full map[string]json.RawMessage
		json.Unmarshal([]byte(out.stdout), &full)
		nb := len(full["network"])
		p.Logf("result %d bytes (output limit %d); network section %d bytes, %d refusals listed, %d dropped", len(out.stdout), 256<<10, nb, listed, r.Network.RefusedDropped)
		if nb > 64<<10+256 {
			p.Errorf("the network section is %d bytes, bound 64 KiB (+ the hosts)", nb)
		}
		if len(out.stdout) > 256<<10+resultMargin {
			p.Errorf("LEAK: the result is %d bytes, bound: the 256 KiB output limit + %d", len(out.stdout), resultMargin)
		}
		for _, f := range r.Network.Refused {
			if len(f.Host) > 259 || len(f.Reason) > 203 {
				p.Errorf("a refusal not cut: host %d bytes, reason %d", len(f.Host), len(f.Reason))
			}
		}
	})
}

// TestResultSizeEscapes: a stdout that is not JSON is returned as a JSON
// string; its escapes (6 bytes for a control byte) cannot grow the
// printed result past the output limit plus the documented margin. The
// probe writes the output limit's worth of \x01 bytes (256 KiB), then
// one byte more (stopped at the limit). Control: the output kept is those
// bytes, the cut counted in output_dropped.
func TestResultSizeEscapes(t *testing.T) {
	probe(t, "res/result-escapes", func(p *P, m *mode) {
		const limit = 256 << 10
		sk := pyProbe(p, m, "escapes", `
sys.stdout.buffer.write(b"\x01" * REQ["n"])
sys.stdout.flush()
`, "limits:\n  output: 256Ki\n")
		for _, tc := range []struct {
			n        int
			code     int
			stopped  string
			wantCode string
		}{{limit, 0, "", "0"}, {limit + 1, 7, "output_limit", "7 (output limit)"}} {
			out := m.run(p, sk, runOpts{input: mustJSON(map[string]any{"n": tc.n})})
			if out.code != tc.code || !out.parsed || out.res.StoppedReason != tc.stopped {
				p.Fatalf("%d bytes of \\x01: want exit %s\n%s", tc.n, tc.wantCode, out)
			}
			var full struct {
				Output  string `json:"output"`
				Dropped int64  `json:"output_dropped"`
			}
			if err := json.Unmarshal([]byte(out.stdout), &full); err != nil {
				p.Fatalf("the result: %v", err)
			}
			p.Logf("%d bytes of \\x01 written: result %d bytes (output limit %d), %d kept, output_dropped %d", tc.n, len(out.stdout), limit, len(full.Output), full.Dropped)
			if len(out.stdout) > limit+resultMargin {
				p.Errorf("LEAK: %d bytes of \\x01 written: the result is %d bytes, bound: the 256 KiB output limit + %d", tc.n, len(out.stdout), resultMargin)
			}
			if full.Output != strings.Repeat("\x01", len(full.Output)) || len(full.Output) < limit/6-1 {
				p.Errorf("control: the output kept is %d bytes, want at least %d bytes of \\x01", len(full.Output), limit/6-1)
			}
			if want := int64(min(tc.n, limit) - len(full.Output)); full.Dropped != want {
				p.Errorf("output_dropped %d, want %d", full.Dropped, want)
			}
		}
	})
}

// TestEgressConnTotal: past 4096 connections to hosts in a run, the next
// ones are refused and never reach the origin. Control: the first 4096
// do (the origin's own accept count).
func TestEgressConnTotal(t *testing.T) {
	probe(t, "net/egress-conn-total", func(p *P, m *mode) {
		o := startOrigin(p, false)
		hp := fmt.Sprintf("api.test:%d", o.port)
		sk := pyProbe(p, m, "eg-total", `
P = REQ["port"]
ADDR = socket.gethostbyname("api.test")
REQB = ("GET /n HTTP/1.1\r\nHost: api.test:%d\r\nConnection: close\r\n\r\n" % P).encode()
ok = failed = 0
for i in range(REQ["n"]):
    try:
        s = socket.create_connection((ADDR, P), timeout=10)
        s.sendall(REQB)
        data = b""
        while True:
            b = s.recv(65536)
            if not b: break
            data += b
        s.close()
        if data.startswith(b"HTTP/1.1 200"): ok += 1
        else: failed += 1
    except OSError:
        failed += 1
OUT["ok"] = ok
OUT["failed"] = failed
done()
`, fmt.Sprintf("network:\n  hosts: [%q]\nlimits:\n  timeout: 120s\n", hp))
		n := relayedBound + 20
		out := m.run(p, sk, runOpts{input: mustJSON(map[string]any{"port": o.port, "n": n}), flags: []string{"--network", "allow", "--resolve", hp + ":127.0.0.1"}, timeout: 150 * time.Second})
		out.wantCode(p, 0)
		v := out.out(p)
		conns, log := o.seen()
		r := out.netResult(p)
		if len(log) < relayedBound {
			if r.refusals("", "limit: ") > 0 {
				p.Fatalf("a bound refused connections before %d reached the origin (it served %d): %+v", relayedBound, len(log), r.Network.Refused)
			}
			p.Skipf("skipped: the origin served %d requests, fewer than the %d the bound lets through (probe: ok %v, failed %v): this host could not make that many connections", len(log), relayedBound, v["ok"], v["failed"])
		}
		if conns != relayedBound || len(log) != relayedBound {
			p.Errorf("LEAK: the origin accepted %d connections and served %d requests, bound %d", conns, len(log), relayedBound)
		}
		if got := r.refusals("api.test", "limit: 4096 connections to hosts in one run"); got != n-relayedBound {
			p.Errorf("%d refusals of the bound counted, want %d: %+v", got, n-relayedBound, r.Network.Refused)
		}
	})
}

// rawOrigin is a TCP listener on 127.0.0.1 that counts the connections
// it accepts, records every byte it reads, and answers each connection's
// first bytes with reply.
type rawOrigin struct {
	port  int
	mu    sync.Mutex
	conns int
	raw   []byte
}

func startRawOrigin(p *P, reply []byte) *rawOrigin {
	p.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		p.Fatalf("%v", err)
	}
	p.Cleanup(func() { l.Close() })
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
				buf := make([]byte, 65536)
				answered := false
				for {
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					n, err := c.Read(buf)
					o.mu.Lock()
					o.raw = append(o.raw, buf[:n]...)
					o.mu.Unlock()
					if err != nil {
						return
					}
					if !answered {
						c.Write(reply)
						answered = true
					}
				}
			}()
		}
	}()
	return o
}

func (o *rawOrigin) seen() (int, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.conns, string(o.raw)
}

// clientHello builds a TLS ClientHello record whose server_name list
// holds entries (type, name).
func clientHello(entries ...any) []byte {
	body := []byte{3, 3}
	body = append(body, make([]byte, 32)...)
	body = append(body, 0, 0, 2, 0x13, 0x01, 1, 0)
	var list []byte
	for i := 0; i+1 < len(entries); i += 2 {
		name := entries[i+1].(string)
		list = append(list, byte(entries[i].(int)))
		list = bin.BigEndian.AppendUint16(list, uint16(len(name)))
		list = append(list, name...)
	}
	var exts []byte
	if len(list) > 0 {
		exts = bin.BigEndian.AppendUint16([]byte{0, 0}, uint16(len(list)+2))
		exts = bin.BigEndian.AppendUint16(exts, uint16(len(list)))
		exts = append(exts, list...)
	}
	body = bin.BigEndian.AppendUint16(body, uint16(len(exts)))
	body = append(body, exts...)
	msg := append([]byte{1, 0, byte(len(body) >> 8), byte(len(body))}, body...)
	return append([]byte{0x16, 3, 1, byte(len(msg) >> 8), byte(len(msg))}, msg...)
}

// tlsAlert is what the TLS-speaking raw origin answers: a TLS record.
var tlsAlert = []byte{0x15, 3, 3, 0, 2, 2, 40}

// TestEgressTLSChecks: a tunnel's or a TLS connection's first bytes are
// checked before the host hears of them. A CONNECT to a granted host
// whose first payload is bad (plaintext for another host, an SSH banner,
// binary, a ClientHello naming another host, with two server_name
// entries, or with an entry of another type) never reaches the origin;
// plaintext after a good ClientHello never reaches it either, whether it
// speaks TLS (answers with a TLS record) or HTTP. Controls, first: a good
// ClientHello reaches the TLS origin through CONNECT, a plain request
// reaches the HTTP one.
func TestEgressTLSChecks(t *testing.T) {
	probe(t, "net/egress-tls-checks", func(p *P, m *mode) {
		tlsO := startRawOrigin(p, tlsAlert)
		httpO := startRawOrigin(p, []byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
		ht, hh := fmt.Sprintf("api.test:%d", tlsO.port), fmt.Sprintf("api.test:%d", httpO.port)
		good := clientHello(0, "api.test")
		plain := "GET /evil HTTP/1.1\r\nHost: evil.test\r\n\r\n"
		sk := pyProbe(p, m, "eg-tls", `
def tunnel(port, payload, direct=False):
    if direct:
        s = socket.create_connection(("api.test", port), timeout=5)
    else:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
        s.sendall(("CONNECT api.test:%d HTTP/1.1\r\nHost: api.test:%d\r\n\r\n" % (port, port)).encode())
        r = s.recv(4096)
        if not r.startswith(b"HTTP/1.1 200"):
            return "CONNECT: " + r.decode("latin-1").split("\r\n")[0]
    s.sendall(payload)
    s.settimeout(1)
    data = b""
    try:
        while True:
            b = s.recv(4096)
            if not b: break
            data += b
    except OSError as e:
        return "%d bytes, %s" % (len(data), e.strerror)
    return "%d bytes, closed" % len(data)
for st in REQ["steps"]:
    attempt(st["key"], lambda st=st: tunnel(st["port"], bytes.fromhex(st["hex"]), st.get("direct", False)))
done()
`, fmt.Sprintf("network:\n  hosts: [%q, %q]\n", ht, hh))
		type stp = map[string]any
		hx := func(b []byte) string { return hex.EncodeToString(b) }
		steps := []stp{
			{"key": "control tls", "port": tlsO.port, "hex": hx(good)},
			{"key": "control http", "port": httpO.port, "hex": hx([]byte("GET /control HTTP/1.1\r\nHost: " + hh + "\r\nConnection: close\r\n\r\n")), "direct": true},
			{"key": "connect plaintext", "port": tlsO.port, "hex": hx([]byte(plain))},
			{"key": "connect ssh", "port": tlsO.port, "hex": hx([]byte("SSH-2.0-OpenSSH_9.6\r\n"))},
			{"key": "connect binary", "port": tlsO.port, "hex": "00010203ff"},
			{"key": "connect other sni", "port": tlsO.port, "hex": hx(clientHello(0, "evil.test"))},
			{"key": "connect two names", "port": tlsO.port, "hex": hx(clientHello(0, "api.test", 0, "evil.test"))},
			{"key": "connect other type", "port": tlsO.port, "hex": hx(clientHello(0, "api.test", 1, "evil.test"))},
			{"key": "connect type first", "port": tlsO.port, "hex": hx(clientHello(1, "evil.test", 0, "api.test"))},
			{"key": "plaintext after hello, TLS host", "port": tlsO.port, "hex": hx(append(append([]byte{}, good...), plain...)), "direct": true},
			{"key": "plaintext after hello, HTTP host", "port": httpO.port, "hex": hx(append(append([]byte{}, good...), plain...)), "direct": true},
			{"key": "plaintext after hello, HTTP host, CONNECT", "port": httpO.port, "hex": hx(append(append([]byte{}, good...), plain...))},
		}
		o := m.skill(p, sk, mustJSON(map[string]any{"steps": steps}), "--network", "allow", "--resolve", ht+":127.0.0.1", "--resolve", hh+":127.0.0.1")
		o.wantCode(p, 0)
		v := o.out(p)
		time.Sleep(200 * time.Millisecond)
		tconns, traw := tlsO.seen()
		hconns, hraw := httpO.seen()
		if !strings.HasPrefix(traw, string(good)) || !strings.Contains(hraw, "GET /control") {
			p.Fatalf("control: the TLS origin read %q, the HTTP origin %q: the checks below prove nothing (probe %v)", traw, hraw, v)
		}
		// The TLS origin: the control, then the hello of "plaintext after
		// hello, TLS host", and nothing else.
		if want := string(good) + string(good); tconns != 2 || traw != want {
			p.Errorf("LEAK: the TLS origin accepted %d connections (want 2) and read %q, want the two good hellos only (probe %v)", tconns, traw, v)
		}
		// The HTTP origin: the control request, then the two hellos.
		if hconns != 3 || strings.Contains(hraw, "evil") {
			p.Errorf("LEAK: the HTTP origin accepted %d connections (want 3) and read %q (probe %v)", hconns, hraw, v)
		}
		r := o.netResult(p)
		for _, want := range []string{
			`Host "evil.test" does not match`, "neither TLS nor HTTP", `(SNI) "evil.test" does not match`,
			"more than one server_name entry", "a server_name entry of type 1",
			"plaintext after the ClientHello", "did not answer the ClientHello with TLS",
		} {
			if r.refusals("api.test", want) == 0 {
				p.Errorf("no refusal %q reported: %+v", want, r.Network.Refused)
			}
		}
	})
}
