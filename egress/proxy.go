package egress

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/skillrun/skillrun/egress/policy"
)

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
