package egress

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/skillrun/skillrun/egress/policy"
)

// Fuzz targets of what the sandbox's bytes go through on the host side
// (hack/fuzz.sh runs them; their seeds run as tests). Each checks
// properties, not only that nothing panics.

func fuzzServer() *server {
	r, _ := policy.ParseRule("api.test:8080")
	w, _ := policy.ParseRule("*.wild.test:443")
	return newServer(&policy.Policy{Rules: []policy.Rule{r, w}, Resolve: map[string]netip.Addr{"api.test:8080": netip.MustParseAddr("127.0.0.1")}})
}

// checkRefusals: what the report keeps is bounded.
func checkRefusals(t *testing.T, s *server) {
	t.Helper()
	rs := s.refusals()
	if len(rs) > maxRefusals+maxLimitRefusals {
		t.Fatalf("%d refusals listed", len(rs))
	}
	for _, r := range rs {
		if len(r.Host) > maxRefusalHost+3 || len(r.Reason) > maxRefusalReason+3 {
			t.Fatalf("refusal not cut: %d/%d bytes", len(r.Host), len(r.Reason))
		}
	}
}

// FuzzRelayRequests feeds a connection's bytes to the relay's request
// reading and checks (readRequest, requestOK), writing each request that
// passes as the relay writes it upstream (prepareRequest, Request.Write).
// Properties: what is written upstream parses, with the standard
// library's server-side parser, as exactly the requests that passed, in
// order, each for api.test:8080 with the same method and path (no
// request hides in another's bytes, none for another host); no head read
// takes more than its bound.
func FuzzRelayRequests(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: api.test:8080\r\n\r\n",
		"\r\nGET /a HTTP/1.1\r\nHost: api.test:8080\r\n\r\nGET /b HTTP/1.1\r\nHost: evil.test\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: api.test:8080\r\nContent-Length: 5\r\n\r\nhelloGET /x HTTP/1.1\r\nHost: api.test:8080\r\n\r\n",
		"POST /c HTTP/1.1\r\nHost: api.test:8080\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"POST /s HTTP/1.1\r\nHost: api.test:8080\r\nContent-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /evil HTTP/1.1\r\nHost: evil.test\r\n\r\n",
		"GET http://api.test:8080/abs HTTP/1.1\r\nHost: api.test:8080\r\n\r\n",
		"GET /h2c HTTP/1.1\r\nHost: api.test:8080\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n\r\n",
		"GET / HTTP/1.0\r\nHost: api.test:8080\r\n\r\n",
		"CONNECT other.test:443 HTTP/1.1\r\nHost: api.test:8080\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test:8080\r\nX: " + strings.Repeat("a", 40<<10) + "\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := fuzzServer()
		src := &countingReader{r: bytes.NewReader(data)}
		cc := &clientConn{lim: &limitReader{r: src}}
		cc.lim.lift()
		cc.br = bufio.NewReaderSize(cc.lim, headReadAhead)
		var up bytes.Buffer
		var passed []string
		for i := 0; i < 64; i++ {
			before := src.n - int64(cc.br.Buffered())
			req, ok := s.readRequest(cc, "api.test", 8080, farFuture)
			if read := src.n - before; read > maxHeadBytes+2*headReadAhead+maxLeadingEOL {
				t.Fatalf("a head took %d bytes from the socket", read)
			}
			if !ok || !s.requestOK(req, "api.test", 8080) {
				break
			}
			prepareRequest(req)
			mark := up.Len()
			if req.Write(&up) != nil {
				// A body cut short: the relay stops there too, and the
				// host reads a request of api.test's cut short.
				up.Truncate(mark)
				break
			}
			passed = append(passed, req.Method+" "+req.URL.RequestURI())
			if req.Close {
				break
			}
		}
		// What the origin would read.
		br := bufio.NewReader(&up)
		for i, want := range passed {
			req, err := http.ReadRequest(br)
			if err != nil {
				t.Fatalf("request %d (%s) written upstream does not parse: %v\n%q", i, want, err, up.String())
			}
			if got := req.Method + " " + req.URL.RequestURI(); got != want {
				t.Fatalf("request %d upstream is %q, want %q", i, got, want)
			}
			if !hostMatches(req.Host, "api.test", 8080) || req.URL.Host != "" && !hostMatches(req.URL.Host, "api.test", 8080) {
				t.Fatalf("request %d upstream is for %q (%q)", i, req.Host, req.URL.Host)
			}
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				t.Fatalf("request %d's body upstream: %v", i, err)
			}
		}
		if rest, _ := io.ReadAll(br); len(rest) != 0 {
			t.Fatalf("%d bytes upstream after the %d requests that passed: %q", len(rest), len(passed), rest)
		}
		checkRefusals(t, s)
	})
}

// farFuture is a deadline the fuzz targets never reach (they read from
// memory).
var farFuture = time.Now().AddDate(100, 0, 0)

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// FuzzClientHello feeds a connection's first bytes to the ClientHello
// checks (readClientHello, helloServerName, the standard library's
// parser). Properties: the records taken are a prefix of the input, and
// no byte past them is read from the buffer; a hello that passes has one
// server name both parsers agree on; the message is within its bound.
func FuzzClientHello(f *testing.F) {
	f.Add(hello(false, sniEntry{0, "api.test"}))
	f.Add(hello(false, sniEntry{0, "api.test"}, sniEntry{1, "evil.test"}))
	f.Add(hello(true, sniEntry{0, "api.test"}))
	f.Add(hello(false))
	f.Add(append(hello(false, sniEntry{0, "api.test"}), "GET / HTTP/1.1\r\n\r\n"...))
	// A hello split over two records.
	h := hello(false, sniEntry{0, "api.test"})
	msg := h[recordHeaderLen:]
	split := append([]byte{recordHandshake, 3, 1, 0, 10}, msg[:10]...)
	split = append(split, recordHandshake, 3, 1, byte((len(msg)-10)>>8), byte(len(msg)-10))
	f.Add(append(split, msg[10:]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(data), headReadAhead)
		raw, sni, err := checkClientHello(br)
		if err != nil {
			return
		}
		if !bytes.HasPrefix(data, raw) {
			t.Fatalf("the records taken are not the input's start")
		}
		rest, _ := io.ReadAll(br)
		if !bytes.Equal(rest, data[len(raw):]) {
			t.Fatalf("bytes past the hello were consumed")
		}
		_, msg, err := readClientHello(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil || len(msg) > maxHelloBytes {
			t.Fatalf("re-read: %v, %d bytes", err, len(msg))
		}
		std, err := clientHelloSNI(bytes.NewReader(raw))
		if err != nil || std != sni {
			t.Fatalf("the standard library reads %q (%v), the check %q", std, err, sni)
		}
		if sni != "" && strings.Count(string(msg), sni) == 0 {
			t.Fatalf("server name %q not in the message", sni)
		}
	})
}

// FuzzDNSQuery feeds datagrams to the sandbox's DNS (answer).
// Properties: an answer parses, has the query's ID and is a response; a
// record answered is an A record in the synthetic range for a name the
// policy allows, and the same name always gets the same address; names
// kept and refusals stay bounded.
func FuzzDNSQuery(f *testing.F) {
	q := func(name string, typ dnsmessage.Type) []byte {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 0x1234, RecursionDesired: true})
		b.StartQuestions()
		b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET})
		out, _ := b.Finish()
		return out
	}
	f.Add(q("api.test.", dnsmessage.TypeA))
	f.Add(q("x.wild.test.", dnsmessage.TypeA))
	f.Add(q("api.test.", dnsmessage.TypeAAAA))
	f.Add(q("evil.test.", dnsmessage.TypeA))
	f.Add(q("api.test.evil.test.", dnsmessage.TypeA))
	f.Add([]byte{0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'a', 0, 'b', 0, 0, 1, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := fuzzServer()
		for i := 0; i < 2; i++ { // twice: the same answer
			resp := s.answer(data)
			if resp == nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(resp)
			if err != nil {
				t.Fatalf("the answer does not parse: %v", err)
			}
			if !h.Response || len(data) < 2 || h.ID != uint16(data[0])<<8|uint16(data[1]) {
				t.Fatalf("header %+v", h)
			}
			qs, err := p.AllQuestions()
			if err != nil {
				t.Fatalf("questions: %v", err)
			}
			for {
				rh, err := p.AnswerHeader()
				if err == dnsmessage.ErrSectionDone {
					break
				}
				if err != nil {
					t.Fatalf("answer: %v", err)
				}
				a, err := p.AResource()
				if err != nil || rh.Type != dnsmessage.TypeA {
					t.Fatalf("an answer that is not A: %v %v", rh.Type, err)
				}
				addr := netip.AddrFrom4(a.A)
				name, err := policy.NormalizeName(rh.Name.String())
				if err != nil || !s.policy.AllowsName(name) || !SyntheticPrefix.Contains(addr) || len(qs) != 1 {
					t.Fatalf("answered %s %v for %q (%v)", rh.Name, addr, name, err)
				}
				if got, _ := s.nameOf(addr); got != name {
					t.Fatalf("%v was given to %q, answered for %q", addr, got, name)
				}
			}
		}
		if len(s.byName) > maxNames {
			t.Fatalf("%d names", len(s.byName))
		}
		checkRefusals(t, s)
	})
}
