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
)

// recorder keeps every byte read through it, to replay them upstream.
type recorder struct {
	r   io.Reader
	buf bytes.Buffer
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf.Write(p[:n])
	return n, err
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
	n, err := NormalizeName(h)
	return err == nil && n == name
}

// relay checks the first bytes of a connection the policy allows to
// name:port (TLS: SNI; HTTP: Host, of every request), connects to the
// host (or uses up) and copies both ways. pre are bytes already read
// from c.
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
	switch {
	case first[0] == 0x16: // TLS handshake record
		sni, err := clientHelloSNI(br)
		if err != nil {
			s.refuse(name, port, "TLS: unreadable ClientHello")
			return
		}
		if sni == "" {
			s.refuse(name, port, "TLS: ClientHello without a server name (SNI)")
			return
		}
		if n, _ := NormalizeName(sni); n != name {
			s.refuse(name, port, "TLS: server name (SNI) %q does not match", printable(sni))
			return
		}
	case isLetter(first[0]):
		// A letter starts an HTTP request (any case: servers take
		// "get" too), which must then parse as one; SSH's banner is the
		// one text protocol passed through as it is.
		if b, _ := br.Peek(4); string(b) != "SSH-" {
			httpMode = true
		}
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

	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(c, u)
		_ = c.CloseWrite()
	}()
	if httpMode {
		s.relayHTTP(br, req, u, name, port)
	} else {
		// What the checks read, then the rest straight from the socket
		// (splice(2) between two TCP sockets).
		if _, err := u.Write(rec.buf.Bytes()); err == nil {
			_, _ = io.Copy(u, c)
		}
	}
	_ = u.CloseWrite()
	<-done
}

func isLetter(b byte) bool { return b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' }

// relayHTTP forwards requests, each checked, until the client stops or
// sends one for another host. After a protocol upgrade it copies bytes.
func (s *server) relayHTTP(br *bufio.Reader, req *http.Request, u *net.TCPConn, name string, port int) {
	for {
		req.Header.Del("Proxy-Connection")
		req.Header.Del("Proxy-Authorization")
		if !req.ProtoAtLeast(1, 1) {
			req.Close = true // written as HTTP/1.1: keep 1.0's close
		}
		if err := req.Write(u); err != nil {
			return
		}
		if req.Header.Get("Upgrade") != "" {
			if n := br.Buffered(); n > 0 {
				b, _ := br.Peek(n)
				if _, err := u.Write(b); err != nil {
					return
				}
				br.Discard(n)
			}
			// The rest is not HTTP: the connection was checked.
			_, _ = io.Copy(u, br)
			return
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
		req.Header.Del("Proxy-Connection")
		req.Header.Del("Proxy-Authorization")
		req.RequestURI = ""
		if !req.ProtoAtLeast(1, 1) {
			req.Close = true
		}
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
	name, err := NormalizeName(h)
	if err != nil {
		s.refuse(printable(h), port, "proxy: malformed name")
		proxyError(c, http.StatusForbidden, "skillrun egress: malformed host name")
		return "", 0, false
	}
	if !s.policy.allows(name, port) {
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
