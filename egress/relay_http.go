package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Plain HTTP through the relay: each request checked, prepared and
// written upstream; the responses read back in order.

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
