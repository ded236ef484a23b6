package egress

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/skillrun/skillrun/egress/policy"
)

// dnsTTL is the TTL of the synthetic answers (they never change for the
// life of a sandbox).
const dnsTTL = 300

// serveUDP answers DNS queries on the sandbox's UDP socket until it is
// closed.
func (s *server) serveUDP(c *net.UDPConn) {
	buf := make([]byte, dnsUDPSize)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if isClosed(err) {
				return
			}
			continue
		}
		if resp := s.answer(buf[:n]); resp != nil {
			_, _ = c.WriteToUDPAddrPort(resp, from)
		}
	}
}

// serveDNSTCP answers DNS over TCP (two-byte length prefixes): each
// query of up to maxDNSQuery bytes, whole within headTimeout.
func (s *server) serveDNSTCP(c net.Conn) {
	var l [2]byte
	var buf []byte
	for {
		_ = c.SetReadDeadline(time.Now().Add(s.headTimeout))
		if got, err := io.ReadFull(c, l[:]); err != nil {
			if got > 0 && isTimeout(err) { // (an idle connection is just closed)
				s.refuse("127.0.0.1", DNSPort, limitPrefix+"DNS query not complete within %v", s.headTimeout)
			}
			return
		}
		n := int(binary.BigEndian.Uint16(l[:]))
		if n > maxDNSQuery {
			s.refuse("127.0.0.1", DNSPort, limitPrefix+"DNS query over %d bytes", maxDNSQuery)
			return
		}
		if buf == nil {
			buf = make([]byte, maxDNSQuery)
		}
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			if isTimeout(err) {
				s.refuse("127.0.0.1", DNSPort, limitPrefix+"DNS query not complete within %v", s.headTimeout)
			}
			return
		}
		resp := s.answer(buf[:n])
		if resp == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(resp)), uint16(len(resp)))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return
		}
	}
}

// answer returns the response to one query, nil to drop it: an allowed
// name gets its synthetic IPv4 address (A) or no records (other types),
// anything else NXDOMAIN. No query is ever forwarded.
func (s *server) answer(q []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil || h.Response {
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		rh.RCode = dnsmessage.RCodeFormatError
		return build(rh, nil, nil)
	}
	question := qs[0]
	if h.OpCode != 0 {
		rh.RCode = dnsmessage.RCodeNotImplemented
		return build(rh, &question, nil)
	}
	raw := question.Name.String()
	name, err := policy.NormalizeName(raw)
	switch {
	case err != nil:
		s.refuse(printable(raw), 0, "DNS: malformed name")
		rh.RCode = dnsmessage.RCodeNameError
		return build(rh, &question, nil)
	case question.Class != dnsmessage.ClassINET:
		rh.RCode = dnsmessage.RCodeRefused
		return build(rh, &question, nil)
	case !s.policy.AllowsName(name):
		s.refuse(name, 0, "DNS: name not allowed")
		rh.RCode = dnsmessage.RCodeNameError
		return build(rh, &question, nil)
	}
	if question.Type != dnsmessage.TypeA {
		return build(rh, &question, nil) // NODATA: IPv4 only
	}
	a, ok := s.addrFor(name)
	if !ok {
		s.refuse(name, 0, limitPrefix+"DNS answers for %d names", maxNames)
		rh.RCode = dnsmessage.RCodeServerFailure
		return build(rh, &question, nil)
	}
	return build(rh, &question, &dnsmessage.AResource{A: a.As4()})
}

func build(h dnsmessage.Header, q *dnsmessage.Question, a *dnsmessage.AResource) []byte {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), h)
	b.EnableCompression()
	if q != nil {
		if b.StartQuestions() != nil || b.Question(*q) != nil {
			return nil
		}
		if a != nil {
			if b.StartAnswers() != nil {
				return nil
			}
			rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: dnsTTL}
			if b.AResource(rh, *a) != nil {
				return nil
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// printable makes a refused name safe to report.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r >= 0x7f {
			return '?'
		}
		return r
	}, s)
}

func isClosed(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "use of closed") || err == net.ErrClosed)
}
