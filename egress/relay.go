package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/skillrun/skillrun/egress/policy"
)

// recorder keeps every byte read through it, to replay them upstream,
// until it is turned off.
type recorder struct {
	r   io.Reader
	buf bytes.Buffer
	off bool
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if !r.off {
		r.buf.Write(p[:n])
	}
	return n, err
}

// stop turns recording off and drops what was kept.
func (r *recorder) stop() {
	r.off = true
	r.buf = bytes.Buffer{}
}

// helloConn is the net.Conn crypto/tls parses a ClientHello from: reads
// come from the client, writes (an alert) go nowhere.
type helloConn struct{ r io.Reader }

func (c helloConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c helloConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c helloConn) Close() error                     { return nil }
func (c helloConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c helloConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c helloConn) SetDeadline(time.Time) error      { return nil }
func (c helloConn) SetReadDeadline(time.Time) error  { return nil }
func (c helloConn) SetWriteDeadline(time.Time) error { return nil }

var errHelloRead = errors.New("client hello read")

// clientHelloSNI reads a TLS ClientHello from r with the standard
// library's parser and returns its server name ("" when it has none).
func clientHelloSNI(r io.Reader) (string, error) {
	var sni string
	got := false
	srv := tls.Server(helloConn{r}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, got = h.ServerName, true
			return nil, errHelloRead
		},
	})
	err := srv.Handshake()
	if !got {
		return "", err
	}
	return sni, nil
}

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

// relay checks the first bytes of a connection the policy allows to
// name:port (TLS: SNI; HTTP: Host, of every request), connects to the
// host (or uses up) and copies both ways. pre are bytes already read
// from c. Anything that is neither a TLS ClientHello nor an HTTP request
// is refused: only those two carry the name the check needs.
func (s *server) relay(ctx context.Context, c *net.TCPConn, pre []byte, name string, port int, up ...*net.TCPConn) {
	var u *net.TCPConn
	if len(up) > 0 {
		u = up[0]
	}
	tracked := false
	defer func() {
		if !tracked && u != nil {
			u.Close()
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(peekTimeout))
	rec := &recorder{r: io.MultiReader(bytes.NewReader(pre), c)}
	br := bufio.NewReader(rec)
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	httpMode := false
	if first[0] == 0x16 { // TLS handshake record
		sni, err := clientHelloSNI(br)
		if err != nil {
			s.refuse(name, port, "TLS: unreadable ClientHello")
			return
		}
		if sni == "" {
			s.refuse(name, port, "TLS: ClientHello without a server name (SNI)")
			return
		}
		if n, _ := policy.NormalizeName(sni); n != name {
			s.refuse(name, port, "TLS: server name (SNI) %q does not match", printable(sni))
			return
		}
	} else {
		// HTTP: empty lines before the request line are dropped (the
		// request is written anew upstream, never passed as read), then
		// a letter must start the method (any case: servers take "get"
		// too) and the whole head must parse as a request. Anything else
		// (binary, a space, SSH's banner, bytes an origin might read as
		// the start of another request) is refused: fail closed.
		skipped := 0
		for first[0] == '\r' || first[0] == '\n' {
			if skipped++; skipped > maxLeadingEOL {
				s.refuse(name, port, "HTTP: more than %d empty lines before the request", maxLeadingEOL)
				return
			}
			_, _ = br.Discard(1)
			if first, err = br.Peek(1); err != nil {
				return
			}
		}
		if !isLetter(first[0]) {
			s.refuse(name, port, "neither TLS nor HTTP (first byte 0x%02x)", first[0])
			return
		}
		httpMode = true
		// Requests are written anew, never replayed: keeping what the
		// connection carries would hold a whole upload in memory.
		rec.stop()
	}
	var req *http.Request
	if httpMode {
		if req, err = http.ReadRequest(br); err != nil {
			s.refuse(name, port, "HTTP: unreadable request")
			return
		}
		if !s.requestOK(req, name, port) {
			return
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	if u == nil {
		if u, err = s.dial(ctx, name, port); err != nil {
			s.refuse(name, port, "%v", err)
			return
		}
	}
	if !s.track(u) {
		return
	}
	tracked = true
	defer s.untrack(u)
	defer u.Close()
	s.mu.Lock()
	s.report.Connections++
	s.mu.Unlock()

	if httpMode {
		s.relayHTTP(br, req, c, u, name, port)
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = s.copyBulk(c, u, -1)
		_ = c.CloseWrite()
	}()
	// What the checks read, then the rest straight from the socket.
	if _, err := u.Write(rec.buf.Bytes()); err == nil {
		_, _ = s.copyBulk(u, c, -1)
	}
	_ = u.CloseWrite()
	<-done
}

func isLetter(b byte) bool { return b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' }

// sent is a request written upstream, for the response side: its
// method frames the response; upgrade, when not nil, receives whether
// the host switched protocols (a 101 answer to a request that asked).
type sent struct {
	req     *http.Request
	upgrade chan bool
}

// relayHTTP forwards the requests of a plain HTTP connection, each
// checked, until the client stops or sends one for another host; the
// responses go back as the host sent them. Only after the host has
// answered a request carrying Upgrade with 101 Switching Protocols does
// the connection stop being HTTP: then both ways are copied as they are.
// Until then every request is parsed and checked (a request that merely
// asks for an upgrade, and pipelined ones after it, are not trusted).
func (s *server) relayHTTP(br *bufio.Reader, req *http.Request, c, u *net.TCPConn, name string, port int) {
	queue := make(chan sent, 32)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.relayResponses(c, u, queue)
		_ = c.CloseWrite()
	}()
	defer func() {
		_ = u.CloseWrite()
		<-done
	}()
	defer close(queue)
	for {
		prepareRequest(req)
		st := sent{req: req}
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
				if n := br.Buffered(); n > 0 {
					b, _ := br.Peek(n)
					if _, err := u.Write(b); err != nil {
						return
					}
					_, _ = br.Discard(n)
				}
				_, _ = io.Copy(u, br)
				return
			case <-done:
				return
			}
		}
		var err error
		if req, err = http.ReadRequest(br); err != nil {
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

// relayResponses copies the host's bytes to the client as they come,
// and follows the responses' framing, one per request sent, to learn
// whether the host switched protocols. When the host answers an upgrade
// request with 101, it tells the request side (on the request's channel)
// and copies the rest as it is; any other answer to it says false. On a
// response it cannot parse, it stops (the request side then stops too).
func (s *server) relayResponses(c, u *net.TCPConn, queue <-chan sent) {
	tee := &teeConn{r: u, w: c}
	ur := bufio.NewReaderSize(tee, 64<<10)
	for st := range queue {
		ok := s.relayResponse(c, u, ur, st)
		if st.upgrade != nil {
			st.upgrade <- ok == switched
			close(st.upgrade)
		}
		switch ok {
		case switched:
			// The buffered bytes were passed on already.
			_, _ = ur.Discard(ur.Buffered())
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

// relayResponse follows one response (after any 1xx interim ones) to the
// request st; every byte it reads reaches the client through ur's tee.
// Bodies of a known length or read to the connection's end are copied
// from u to c past the buffer (copyBulk).
func (s *server) relayResponse(c, u *net.TCPConn, ur *bufio.Reader, st sent) responseEnd {
	for {
		resp, err := http.ReadResponse(ur, st.req)
		if err != nil {
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
		s.refuse(name, port, "HTTP: Host %q does not match", printable(req.Host))
		return false
	}
	if req.URL.Host != "" && !hostMatches(req.URL.Host, name, port) {
		s.refuse(name, port, "HTTP: request for %q does not match", printable(req.URL.Host))
		return false
	}
	return true
}

// serveProxy serves the sandbox's HTTP proxy: CONNECT host:port, and
// absolute-form requests (http://host:port/path).
func (s *server) serveProxy(ctx context.Context, c *net.TCPConn) {
	_ = c.SetReadDeadline(time.Now().Add(peekTimeout))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method == http.MethodConnect {
		name, port, ok := s.target(c, req.RequestURI, 0)
		if !ok {
			return
		}
		up, err := s.dial(ctx, name, port)
		if err != nil {
			s.refuse(name, port, "%v", err)
			proxyError(c, http.StatusBadGateway, err.Error())
			return
		}
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			up.Close()
			return
		}
		var pre []byte
		if n := br.Buffered(); n > 0 {
			pre, _ = br.Peek(n)
		}
		s.relay(ctx, c, pre, name, port, up)
		return
	}
	// Plain HTTP: each request to its host, checked.
	var up *net.TCPConn
	var upr *bufio.Reader
	upKey := ""
	defer func() {
		if up != nil {
			up.Close()
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
			s.refuse(name, port, "HTTP: Host %q does not match", printable(req.Host))
			proxyError(c, http.StatusForbidden, "Host header does not match the request's host")
			return
		}
		key := name + ":" + strconv.Itoa(port)
		if up == nil || key != upKey {
			if up != nil {
				up.Close()
				s.untrack(up)
			}
			if up, err = s.dial(ctx, name, port); err != nil {
				up = nil
				s.refuse(name, port, "%v", err)
				proxyError(c, http.StatusBadGateway, err.Error())
				return
			}
			if !s.track(up) {
				return
			}
			s.mu.Lock()
			s.report.Connections++
			s.mu.Unlock()
			upr, upKey = bufio.NewReader(up), key
		}
		_ = c.SetReadDeadline(time.Time{})
		prepareRequest(req)
		req.RequestURI = ""
		if err := req.Write(up); err != nil {
			return
		}
		resp, err := http.ReadResponse(upr, req)
		if err != nil {
			return
		}
		err = resp.Write(c)
		resp.Body.Close()
		if err != nil || resp.Close || req.Close {
			s.untrack(up)
			return
		}
		if req, err = http.ReadRequest(br); err != nil {
			s.untrack(up)
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
