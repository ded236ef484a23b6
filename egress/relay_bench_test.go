package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/skillrun/skillrun/egress/policy"
)

// benchOrigin serves /big (64 MiB, Content-Length) and /small.
func benchOrigin(b *testing.B) int {
	b.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	big := make([]byte, 1<<20)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", fmt.Sprint(64<<20))
			for i := 0; i < 64; i++ {
				w.Write(big)
			}
			return
		}
		io.WriteString(w, "ok\n")
	})}
	go srv.Serve(l)
	b.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// benchRelay relays one connection per call (go test -bench Relay
// ./egress/: the relay alone, without a sandbox): the request, then the whole
// answer read by the client.
func benchRelay(b *testing.B, path string) {
	port := benchOrigin(b)
	r, err := policy.ParseRule(fmt.Sprintf("api.test:%d", port))
	if err != nil {
		b.Fatal(err)
	}
	s := newServer(&policy.Policy{Rules: []policy.Rule{r}, Resolve: map[string]netip.Addr{fmt.Sprintf("api.test:%d", port): netip.MustParseAddr("127.0.0.1")}})
	s.maxRelayed = math.MaxInt // b.N connections: the per-connection cost, not the bound
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.AcceptTCP()
			if err != nil {
				return
			}
			go func() { defer c.Close(); s.relay(context.Background(), newClientConn(c), "api.test", port, nil) }()
		}
	}()
	benchClient(b, l.Addr().String(), path, port)
}

// benchClient makes b.N requests for path, one connection each, to addr
// (the origin on port, or a hop to it), reading each whole answer.
func benchClient(b *testing.B, addr, path string, port int) {
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: api.test:%d\r\nConnection: close\r\n\r\n", path, port)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := net.Dial("tcp4", addr)
		if err != nil {
			b.Fatal(err)
		}
		io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		if strings.HasSuffix(path, "big") && n != 64<<20 {
			b.Fatalf("read %d", n)
		}
		c.Close()
	}
}

func BenchmarkRelay64MiB(b *testing.B) { b.SetBytes(64 << 20); benchRelay(b, "/big") }

// BenchmarkProxy64MiB is BenchmarkRelay64MiB through the proxy's
// absolute-form path (http://api.test:PORT/big).
func BenchmarkProxy64MiB(b *testing.B) {
	b.SetBytes(64 << 20)
	port := benchOrigin(b)
	r, err := policy.ParseRule(fmt.Sprintf("api.test:%d", port))
	if err != nil {
		b.Fatal(err)
	}
	s := newServer(&policy.Policy{Rules: []policy.Rule{r}, Resolve: map[string]netip.Addr{fmt.Sprintf("api.test:%d", port): netip.MustParseAddr("127.0.0.1")}})
	s.maxRelayed = math.MaxInt
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.AcceptTCP()
			if err != nil {
				return
			}
			go func() { defer c.Close(); s.serveProxy(context.Background(), c) }()
		}
	}()
	benchClient(b, l.Addr().String(), fmt.Sprintf("http://api.test:%d/big", port), port)
}
func BenchmarkRelaySmall(b *testing.B) { benchRelay(b, "/small") }

// BenchmarkDirectSmall is BenchmarkRelaySmall's request straight to the
// origin: the floor the relay's per-connection cost is read against.
func BenchmarkDirectSmall(b *testing.B) {
	port := benchOrigin(b)
	benchClient(b, fmt.Sprintf("127.0.0.1:%d", port), "/small", port)
}

// BenchmarkForwardSmall is BenchmarkRelaySmall through a bare forwarder
// (accept, dial, copy both ways; no checks): what one hop costs in this
// process, the floor the relay's own checks are read against.
func BenchmarkForwardSmall(b *testing.B) {
	port := benchOrigin(b)
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	origin := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}
	go func() {
		for {
			c, err := l.AcceptTCP()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.DialTCP("tcp4", nil, origin)
				if err != nil {
					return
				}
				defer u.Close()
				done := make(chan struct{})
				go func() { _, _ = io.Copy(c, u); _ = c.CloseWrite(); close(done) }()
				_, _ = io.Copy(u, c)
				_ = u.CloseWrite()
				<-done
			}()
		}
	}()
	benchClient(b, l.Addr().String(), "/small", port)
}
