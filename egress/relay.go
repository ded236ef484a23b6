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
