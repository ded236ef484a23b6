package egress

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/skillrun/skillrun/egress/policy"
)

// hostMatches reports whether an HTTP Host value names name (with, if
// any, port).
func hostMatches(host, name string, port int) bool {
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		h, p = host, ""
	}
	if p != "" && p != strconv.Itoa(port) {
		return false
	}
	n, err := policy.NormalizeName(h)
	return err == nil && n == name
}

// maxLeadingEOL bounds the empty lines (CR and LF bytes) skipped before
// an HTTP request line (RFC 9112 2.2 lets a server ignore them).
const maxLeadingEOL = 16

// clientConn is the sandbox's end of a connection the server reads
// requests or a ClientHello from: the socket, under a budget (lim) while
// a head is read, through one small reader.
type clientConn struct {
	c   *net.TCPConn
	lim *limitReader
	br  *bufio.Reader
}

// deadline sets the socket's read deadline (none without a socket: the
// fuzz targets read from memory).
func (cc *clientConn) deadline(t time.Time) {
	if cc.c != nil {
		_ = cc.c.SetReadDeadline(t)
	}
}

func newClientConn(c *net.TCPConn) *clientConn {
	cc := &clientConn{c: c, lim: &limitReader{r: c}}
	cc.lim.lift()
	cc.br = bufio.NewReaderSize(cc.lim, headReadAhead)
	return cc
}

// passRest writes the bytes read from the client and not yet used to u,
// then copies the rest of the connection to it as it comes.
func (s *server) passRest(u *net.TCPConn, cc *clientConn) {
	if n := cc.br.Buffered(); n > 0 {
		b, _ := cc.br.Peek(n)
		if _, err := u.Write(b); err != nil {
			return
		}
		_, _ = cc.br.Discard(n)
	}
	_, _ = s.copyBulk(u, cc.c, -1)
}

// refuseRead records why reading a head from the sandbox failed: a
// bound (size, time) or what was read. A connection closed before
// sending anything is not a refusal.
func (s *server) refuseRead(host string, port int, what string, err error, hit bool, size int, unreadable string) {
	var ne net.Error
	var r refusal
	switch {
	case hit || errors.Is(err, errLimit):
		s.refuse(host, port, limitPrefix+"%s over %d bytes", what, size)
	case errors.As(err, &ne) && ne.Timeout():
		s.refuse(host, port, limitPrefix+"%s not complete within %v", what, s.headTimeout)
	case errors.As(err, &r):
		s.refuse(host, port, "%s", string(r))
	case errors.Is(err, io.EOF):
	default:
		s.refuse(host, port, "%s", unreadable)
	}
}

// relay serves a connection the policy allows to name:port: the
// synthetic address's, or a CONNECT tunnel's (addrs: the name's
// addresses, resolved before the tunnel was opened). Its first bytes
// must be a TLS ClientHello whose SNI is the name, or an HTTP request
// whose Host (of every request) names it; anything else is refused, as
// only those carry the name the check needs. The host is connected to
// only after the first bytes passed.
func (s *server) relay(ctx context.Context, cc *clientConn, name string, port int, addrs []netip.Addr) {
	deadline := time.Now().Add(s.headTimeout)
	cc.deadline(deadline)
	first, err := cc.br.Peek(1)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			s.refuse(name, port, limitPrefix+"nothing sent within %v", s.headTimeout)
		}
		return
	}
	if first[0] == recordHandshake {
		s.relayTLS(ctx, cc, name, port, addrs, deadline)
		return
	}
	req, ok := s.readRequest(cc, name, port, deadline)
	if !ok || !s.requestOK(req, name, port) {
		return
	}
	u, ok := s.open(ctx, name, port, addrs)
	if !ok {
		return
	}
	defer s.untrack(u)
	defer u.Close()
	s.relayHTTP(cc, req, u, name, port)
}

// open connects to name:port (to addrs when the name was resolved
// already), registers the connection and counts it.
func (s *server) open(ctx context.Context, name string, port int, addrs []netip.Addr) (*net.TCPConn, bool) {
	var u *net.TCPConn
	var err error
	if addrs == nil {
		u, err = s.dial(ctx, name, port)
	} else {
		u, err = s.connect(ctx, addrs, port)
	}
	if err != nil {
		s.refuse(name, port, "%v", err)
		return nil, false
	}
	if !s.track(u) {
		u.Close()
		return nil, false
	}
	s.mu.Lock()
	s.report.Connections++
	s.mu.Unlock()
	return u, true
}

// readRequest reads one request head from the client within the bounds:
// deadline (zero for the next request of a kept-alive connection: then
// headTimeout from its first byte), maxHeadBytes, one of maxHeadParsers.
// Up to maxLeadingEOL empty lines before it are dropped (the request is
// written anew upstream, never passed as read); then a letter must start
// the method (any case: servers take "get" too). Anything else (binary,
// a space, bytes an origin might read as the start of another request)
// is refused: fail closed. host and port name the refusals.
func (s *server) readRequest(cc *clientConn, host string, port int, deadline time.Time) (*http.Request, bool) {
	if deadline.IsZero() {
		// Between requests the client may wait as long as it likes (the
		// connection counts against maxOpenConns); the head may not.
		if _, err := cc.br.Peek(1); err != nil {
			return nil, false
		}
		deadline = time.Now().Add(s.headTimeout)
		cc.deadline(deadline)
	}
	defer cc.deadline(time.Time{})
	for skipped := 0; ; skipped++ {
		b, err := cc.br.Peek(1)
		if err != nil {
			s.refuseRead(host, port, "request head", err, false, maxHeadBytes, "HTTP: unreadable request")
			return nil, false
		}
		if b[0] != '\r' && b[0] != '\n' {
			if !isLetter(b[0]) {
				s.refuse(host, port, "neither TLS nor HTTP (first byte 0x%02x)", b[0])
				return nil, false
			}
			break
		}
		if skipped >= maxLeadingEOL {
			s.refuse(host, port, "HTTP: more than %d empty lines before the request", maxLeadingEOL)
			return nil, false
		}
		_, _ = cc.br.Discard(1)
	}
	if !s.parsing(deadline) {
		s.refuse(host, port, limitPrefix+"request head not complete within %v", s.headTimeout)
		return nil, false
	}
	cc.lim.limit(maxHeadBytes + headReadAhead)
	req, err := http.ReadRequest(cc.br)
	hit := cc.lim.hit
	cc.lim.lift()
	<-s.parsers
	if err != nil {
		switch {
		case !time.Now().Before(deadline):
			// (The parser may drop the timeout of a line cut short
			// and fail on the line instead.)
			err = os.ErrDeadlineExceeded
		case errors.Is(err, io.EOF):
			err = io.ErrUnexpectedEOF // the head had begun
		}
		s.refuseRead(host, port, "request head", err, hit, maxHeadBytes, "HTTP: unreadable request")
		return nil, false
	}
	return req, true
}

// parsing takes one of the head parsers, waiting until deadline.
func (s *server) parsing(deadline time.Time) bool {
	select {
	case s.parsers <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case s.parsers <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// relayTLS checks a connection that starts with a TLS record: its
// ClientHello (exactly its records, up to maxHelloBytes) must name the
// name, unambiguously. Only then is the host connected to and given the
// ClientHello, and nothing more of the client's passes until the host
// answers with a TLS record (a host that does not speak TLS never reads
// what follows); what the client sends next must be TLS records too
// (plaintext after a ClientHello is refused), and after a
// HelloRetryRequest the second ClientHello is checked as the first.
func (s *server) relayTLS(ctx context.Context, cc *clientConn, name string, port int, addrs []netip.Addr, deadline time.Time) {
	hello, ok := s.readHello(cc, name, port, deadline)
	if !ok {
		return
	}
	u, ok := s.open(ctx, name, port, addrs)
	if !ok {
		return
	}
	defer s.untrack(u)
	defer u.Close()
	if _, err := u.Write(hello); err != nil {
		return
	}
	rec, retry, err := serverAnswer(u)
	if err != nil {
		var r refusal
		if errors.As(err, &r) {
			s.refuse(name, port, "%s", string(r))
		}
		return
	}
	if _, err := cc.c.Write(rec); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = s.copyBulk(cc.c, u, -1)
		_ = cc.c.CloseWrite()
	}()
	defer func() {
		_ = u.CloseWrite()
		<-done
	}()
	// The client's next records: a change_cipher_spec (TLS 1.3's
	// middlebox compatibility), then, after a HelloRetryRequest, the
	// second ClientHello; any other record ends the checks. A refusal
	// closes the host's end at once (it may be waiting for more).
	refuse := func(reason string) {
		s.refuse(name, port, "%s", reason)
		u.Close()
	}
	for {
		h, err := cc.br.Peek(recordHeaderLen)
		if !recordPrefixOK(h) {
			refuse("TLS: plaintext after the ClientHello")
			return
		}
		if err != nil || h[0] == recordAlert {
			break
		}
		if h[0] == recordChangeCipherSpec && retry {
			ccs := make([]byte, recordHeaderLen+int(binary.BigEndian.Uint16(h[3:5])))
			if _, err := io.ReadFull(cc.br, ccs); err != nil {
				return
			}
			if _, err := u.Write(ccs); err != nil {
				return
			}
			continue
		}
		if retry {
			retry = false
			if h[0] != recordHandshake {
				refuse("TLS: no second ClientHello after a HelloRetryRequest")
				return
			}
			again, ok := s.readHello(cc, name, port, time.Now().Add(s.headTimeout))
			if !ok {
				u.Close()
				return
			}
			if _, err := u.Write(again); err != nil {
				return
			}
			continue
		}
		break
	}
	s.passRest(u, cc)
}

// recordPrefixOK reports whether h, up to 5 bytes, may start a TLS
// record.
func recordPrefixOK(h []byte) bool {
	if len(h) >= recordHeaderLen {
		return isRecordHeader(h)
	}
	return (len(h) < 1 || h[0] >= recordChangeCipherSpec && h[0] <= recordApplicationData) && (len(h) < 2 || h[1] == 3)
}

// readHello reads and checks a ClientHello for name:port, whole by
// deadline, and returns its records, or refuses it.
func (s *server) readHello(cc *clientConn, name string, port int, deadline time.Time) ([]byte, bool) {
	cc.deadline(deadline)
	defer cc.deadline(time.Time{})
	cc.lim.limit(maxHelloBytes + headReadAhead)
	raw, sni, err := checkClientHello(cc.br)
	hit := cc.lim.hit
	cc.lim.lift()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the record had begun
		}
		s.refuseRead(name, port, "ClientHello", err, hit, maxHelloBytes, "TLS: unreadable ClientHello")
		return nil, false
	}
	if sni == "" {
		s.refuse(name, port, "TLS: ClientHello without a server name (SNI)")
		return nil, false
	}
	if n, _ := policy.NormalizeName(sni); n != name {
		s.refuse(name, port, "TLS: server name (SNI) %s does not match", quoted(sni))
		return nil, false
	}
	return raw, true
}

func isLetter(b byte) bool { return b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' }

// sent is a request written upstream, for the response side: its
// method frames the response; upgrade, when not nil, receives whether
// the host switched protocols (a 101 answer to a request that asked).
type sent struct {
	req     *http.Request
	upgrade chan bool
}

// forResponse is what a response's parser needs of its request (the
// method frames the body): a queued request keeps nothing else of the
// sandbox's head.
func forResponse(req *http.Request) *http.Request {
	return &http.Request{Method: req.Method, Proto: req.Proto, ProtoMajor: req.ProtoMajor, ProtoMinor: req.ProtoMinor}
}

// relayHTTP forwards the requests of a plain HTTP connection, each
// checked, until the client stops or sends one for another host; the
// responses go back as the host sent them. Only after the host has
// answered a request carrying Upgrade with 101 Switching Protocols does
// the connection stop being HTTP: then both ways are copied as they are.
// Until then every request is parsed and checked (a request that merely
// asks for an upgrade, and pipelined ones after it, are not trusted),
// each head within the same bounds as the first.
func (s *server) relayHTTP(cc *clientConn, req *http.Request, u *net.TCPConn, name string, port int) {
	c := cc.c
	queue := make(chan sent, 32)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.relayResponses(c, u, name, port, queue)
		_ = c.CloseWrite()
	}()
	defer func() {
		_ = u.CloseWrite()
		<-done
	}()
	defer close(queue)
	for {
		prepareRequest(req)
		st := sent{req: forResponse(req)}
		if req.Header.Get("Upgrade") != "" {
			st.upgrade = make(chan bool, 1)
		}
		select {
		case <-done: // the response side stopped
			return
		default:
		}
		select {
		case queue <- st:
		case <-done:
			return
		}
		if err := req.Write(u); err != nil {
			return
		}
		if st.upgrade != nil {
			select {
			case ok := <-st.upgrade:
				if !ok {
					break // still HTTP: the next request is checked
				}
				// The host switched protocols: what follows is not HTTP.
				s.passRest(u, cc)
				return
			case <-done:
				return
			}
		}
		var ok bool
		if req, ok = s.readRequest(cc, name, port, time.Time{}); !ok {
			return
		}
		if !s.requestOK(req, name, port) {
			return
		}
	}
}

// prepareRequest readies a checked request to be written upstream: no
// proxy headers, HTTP/1.0's close kept, no h2c upgrade (HTTP/2 frames
// after it would name their host in :authority, which is not checked),
// and no header the client did not send (Request.Write adds a User-Agent
// otherwise).
func prepareRequest(req *http.Request) {
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	if hasToken(req.Header.Values("Upgrade"), "h2c") {
		req.Header.Del("Upgrade")
		req.Header.Del("HTTP2-Settings")
		var keep []string
		for _, v := range req.Header.Values("Connection") {
			for _, t := range strings.Split(v, ",") {
				if t = strings.TrimSpace(t); t != "" && !strings.EqualFold(t, "upgrade") && !strings.EqualFold(t, "http2-settings") {
					keep = append(keep, t)
				}
			}
		}
		req.Header.Del("Connection")
		if len(keep) > 0 {
			req.Header.Set("Connection", strings.Join(keep, ", "))
		}
	}
	if !req.ProtoAtLeast(1, 1) {
		req.Close = true // written as HTTP/1.1: keep 1.0's close
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // written as none
	}
}

// hasToken reports whether a comma-separated header lists token.
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// teeConn reads from r and passes every byte read on to w at once.
type teeConn struct {
	r   io.Reader
	w   io.Writer
	err error // the first write error
}

func (t *teeConn) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 && t.err == nil {
		if _, werr := t.w.Write(p[:n]); werr != nil {
			t.err = werr
			return n, werr
		}
	}
	return n, err
}

// upstream is the host's end of a relayed HTTP connection: every byte
// read from it through br reaches the client at once (a tee), under a
// budget (lim) while a response head is read.
type upstream struct {
	u   *net.TCPConn
	lim *limitReader
	br  *bufio.Reader
}

func newUpstream(c, u *net.TCPConn) *upstream {
	up := &upstream{u: u, lim: &limitReader{r: &teeConn{r: u, w: c}}}
	up.lim.lift()
	up.br = bufio.NewReaderSize(up.lim, respReadAhead)
	return up
}

// relayResponses copies the host's bytes to the client as they come,
// and follows the responses' framing, one per request sent, to learn
// whether the host switched protocols. When the host answers an upgrade
// request with 101, it tells the request side (on the request's channel)
// and copies the rest as it is; any other answer to it says false. On a
// response it cannot parse, it stops (the request side then stops too).
func (s *server) relayResponses(c, u *net.TCPConn, name string, port int, queue <-chan sent) {
	up := newUpstream(c, u)
	for st := range queue {
		ok := s.relayResponse(c, up, name, port, st)
		if st.upgrade != nil {
			st.upgrade <- ok == switched
			close(st.upgrade)
		}
		switch ok {
		case switched:
			// The buffered bytes were passed on already.
			_, _ = up.br.Discard(up.br.Buffered())
			_, _ = s.copyBulk(c, u, -1)
			return
		case failed:
			return
		}
	}
}

type responseEnd int

const (
	answered responseEnd = iota
	switched
	failed
)

// readResponse reads a response head within its bounds: headTimeout
// from its first byte, maxRespHeadBytes, one of maxHeadParsers.
func (s *server) readResponse(up *upstream, name string, port int, req *http.Request) (*http.Response, bool) {
	if _, err := up.br.Peek(1); err != nil {
		return nil, false
	}
	deadline := time.Now().Add(s.headTimeout)
	_ = up.u.SetReadDeadline(deadline)
	defer up.u.SetReadDeadline(time.Time{})
	if !s.parsing(deadline) {
		s.refuse(name, port, limitPrefix+"response head not complete within %v", s.headTimeout)
		return nil, false
	}
	up.lim.limit(maxRespHeadBytes + respReadAhead)
	resp, err := http.ReadResponse(up.br, req)
	hit := up.lim.hit
	up.lim.lift()
	<-s.parsers
	if err != nil {
		if !time.Now().Before(deadline) {
			err = os.ErrDeadlineExceeded
		}
		if hit || isTimeout(err) {
			s.refuseRead(name, port, "response head", err, hit, maxRespHeadBytes, "")
		}
		return nil, false
	}
	return resp, true
}

// relayResponse follows one response (after any 1xx interim ones) to the
// request st; every byte it reads reaches the client through the tee.
// Bodies of a known length or read to the connection's end are copied
// from u to c past the buffer (copyBulk).
func (s *server) relayResponse(c *net.TCPConn, up *upstream, name string, port int, st sent) responseEnd {
	ur, u := up.br, up.u
	for {
		resp, ok := s.readResponse(up, name, port, st.req)
		if !ok {
			return failed
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			if st.upgrade != nil {
				return switched
			}
			return failed // 101 to a request that did not ask
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			continue // interim (100 Continue, 103 Early Hints)
		}
		switch {
		case resp.Body == http.NoBody:
		case len(resp.TransferEncoding) > 0 || resp.ContentLength < 0 && !resp.Close:
			// Chunked (or a body read to the end): through the tee.
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				return failed
			}
			resp.Body.Close()
		case resp.ContentLength >= 0:
			n := int64(ur.Buffered())
			if n > resp.ContentLength {
				n = resp.ContentLength
			}
			_, _ = ur.Discard(int(n))
			if rest := resp.ContentLength - n; rest > 0 {
				if m, err := s.copyBulk(c, u, rest); err != nil || m != rest {
					return failed
				}
			}
		default:
			// Read to the connection's end.
			_, _ = ur.Discard(ur.Buffered())
			_, _ = s.copyBulk(c, u, -1)
			return failed
		}
		// (resp.Body is not closed otherwise: closing reads what it did
		// not, and the bytes were taken past it.)
		if resp.Close {
			return failed
		}
		return answered
	}
}

// requestOK checks one plain HTTP request to name:port: its Host header
// (and an absolute URL's host) must name it.
func (s *server) requestOK(req *http.Request, name string, port int) bool {
	if req.Method == http.MethodConnect {
		s.refuse(name, port, "HTTP: CONNECT through an allowed host (proxy chaining)")
		return false
	}
	if !hostMatches(req.Host, name, port) {
		s.refuse(name, port, "HTTP: Host %s does not match", quoted(req.Host))
		return false
	}
	if !targetOK(req) {
		s.refuse(name, port, "HTTP: request target %s is not a path, an http:// URL or * (OPTIONS)", quoted(req.RequestURI))
		return false
	}
	if req.URL.Host != "" && !hostMatches(req.URL.Host, name, port) {
		s.refuse(name, port, "HTTP: request for %s does not match", quoted(req.URL.Host))
		return false
	}
	return true
}

// targetOK says whether req's request target is one an origin reads as
// the same request: origin-form (/path?query), absolute-form with the
// http scheme and a host, or * for OPTIONS. Anything else (another
// scheme, an opaque URI such as "a:0") would be written upstream in a
// form the origin does not parse as this request.
func targetOK(req *http.Request) bool {
	u := req.URL
	switch {
	case u == nil || u.Opaque != "" || u.User != nil:
		return false
	case u.Scheme == "" && u.Host == "":
		return strings.HasPrefix(u.Path, "/") || req.Method == http.MethodOptions && req.RequestURI == "*"
	default:
		return u.Scheme == "http" && u.Host != ""
	}
}

// proxyHost and the proxy's port name the refusals of what the proxy
// could not read.
const proxyHost = "127.0.0.1"

// serveProxy serves the sandbox's HTTP proxy: CONNECT host:port, and
// absolute-form requests (http://host:port/path), each request head
// within the bounds of a synthetic address's.
func (s *server) serveProxy(ctx context.Context, c *net.TCPConn) {
	cc := newClientConn(c)
	deadline := time.Now().Add(s.headTimeout)
	_ = c.SetReadDeadline(deadline)
	if _, err := cc.br.Peek(1); err != nil {
		if isTimeout(err) {
			s.refuse(proxyHost, ProxyPort, limitPrefix+"nothing sent within %v", s.headTimeout)
		}
		return
	}
	req, ok := s.readRequest(cc, proxyHost, ProxyPort, deadline)
	if !ok {
		return
	}
	if req.Method == http.MethodConnect {
		name, port, ok := s.target(c, req.RequestURI, 0)
		if !ok {
			return
		}
		// The name is resolved (and checked: rebinding) now, to answer
		// 502 when it cannot be reached; the host is connected to only
		// after the tunnel's first bytes passed the checks.
		addrs, err := s.resolve(ctx, name, port)
		if err != nil {
			s.refuse(name, port, "%v", err)
			proxyError(c, http.StatusBadGateway, err.Error())
			return
		}
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		s.relay(ctx, cc, name, port, addrs)
		return
	}
	// Plain HTTP: each request to its host, checked; the responses go
	// back as the host sent them, bodies of a known length past the
	// buffer (copyBulk).
	var u *net.TCPConn
	var up *upstream
	upKey := ""
	defer func() {
		if u != nil {
			s.untrack(u)
			u.Close()
		}
	}()
	for {
		if req.URL.Host == "" || req.URL.Scheme != "http" {
			proxyError(c, http.StatusBadRequest, "not a proxy request (want CONNECT or an absolute http:// URL)")
			return
		}
		name, port, ok := s.target(c, req.URL.Host, 80)
		if !ok {
			return
		}
		if !hostMatches(req.Host, name, port) {
			s.refuse(name, port, "HTTP: Host %s does not match", quoted(req.Host))
			proxyError(c, http.StatusForbidden, "Host header does not match the request's host")
			return
		}
		key := name + ":" + strconv.Itoa(port)
		if u == nil || key != upKey {
			if u != nil {
				s.untrack(u)
				u.Close()
				u = nil
			}
			var err error
			if u, err = s.dial(ctx, name, port); err != nil {
				u = nil
				s.refuse(name, port, "%v", err)
				proxyError(c, http.StatusBadGateway, err.Error())
				return
			}
			if !s.track(u) {
				u.Close()
				u = nil
				return
			}
			s.mu.Lock()
			s.report.Connections++
			s.mu.Unlock()
			up, upKey = newUpstream(c, u), key
		}
		prepareRequest(req)
		req.RequestURI = ""
		if err := req.Write(u); err != nil {
			return
		}
		if s.relayResponse(c, up, name, port, sent{req: forResponse(req)}) != answered || req.Close {
			return
		}
		if req, ok = s.readRequest(cc, proxyHost, ProxyPort, time.Time{}); !ok {
			return
		}
	}
}

// target checks a proxy request's host[:port] against the policy and
// answers 403 when it is refused.
func (s *server) target(c net.Conn, hostport string, defPort int) (string, int, bool) {
	h, p, err := net.SplitHostPort(hostport)
	port := defPort
	if err != nil {
		h = hostport
	} else {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			s.refuse(printable(hostport), 0, "proxy: bad port")
			proxyError(c, http.StatusBadRequest, "bad port")
			return "", 0, false
		}
		port = n
	}
	if port == 0 {
		s.refuse(printable(hostport), 0, "proxy: no port")
		proxyError(c, http.StatusBadRequest, "no port")
		return "", 0, false
	}
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		s.refuse(h, port, "IP address, not a name")
		proxyError(c, http.StatusForbidden, "skillrun egress: IP addresses are not allowed, only the skill's declared host names")
		return "", 0, false
	}
	name, err := policy.NormalizeName(h)
	if err != nil {
		s.refuse(printable(h), port, "proxy: malformed name")
		proxyError(c, http.StatusForbidden, "skillrun egress: malformed host name")
		return "", 0, false
	}
	if !s.policy.Allows(name, port) {
		s.refuse(name, port, "not allowed")
		proxyError(c, http.StatusForbidden, "skillrun egress: "+name+":"+strconv.Itoa(port)+" is not in the skill's network allowlist")
		return "", 0, false
	}
	return name, port, true
}

func proxyError(c net.Conn, code int, msg string) {
	body := msg + "\n"
	_, _ = io.WriteString(c, "HTTP/1.1 "+strconv.Itoa(code)+" "+http.StatusText(code)+"\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
}
