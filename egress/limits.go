package egress

import (
	"errors"
	"io"
	"math"
	"strconv"
	"time"
)

// The bounds of what a sandbox can make the host side spend, each per
// sandbox (one server). Past a bound the connection is refused and the
// refusal counted in the report under a reason that starts with
// "limit:"; nothing past a bound is buffered. docs/security.md lists them
// ("What the host side spends").
const (
	// maxOpenConns bounds the connections the sandbox holds open to the
	// server at once: the proxy, the synthetic addresses and DNS over
	// TCP together. One more is accepted and closed at once.
	maxOpenConns = 256
	// maxRelayed bounds the connections made to hosts over the server's
	// life (each one a host lookup, unless mapped, and a host port).
	// Requests on a kept-alive connection are not counted.
	maxRelayed = 4096
	// maxHeadBytes bounds an HTTP request's head (request line and
	// header fields), every request of a connection: a head of up to
	// this size always passes; what is read for it from the socket
	// (with the reader's look-ahead) never exceeds maxHeadBytes +
	// headReadAhead.
	maxHeadBytes = 32 << 10
	// headReadAhead is the size of a connection's request reader.
	headReadAhead = 4 << 10
	// headTimeout bounds the time from a request head's first byte (for
	// a connection's first request or ClientHello: from the accept) to
	// its end, every request of a connection; and a DNS query over TCP.
	headTimeout = 10 * time.Second
	// maxHeadParsers bounds the request heads parsed at once: a head of
	// many short fields costs the parser several times its size.
	maxHeadParsers = 8
	// maxRespHeadBytes bounds a host's response head (the host is not
	// the sandbox, but it may reflect what the sandbox sent).
	maxRespHeadBytes = 64 << 10
	// respReadAhead is the size of a connection's response reader
	// (chunked bodies go through it; bodies of a known length do not).
	respReadAhead = 64 << 10
	// maxHelloBytes bounds the TLS records of a ClientHello.
	maxHelloBytes = 64 << 10
	// serverHelloTimeout bounds the wait for a host's first TLS record
	// after the ClientHello was passed to it.
	serverHelloTimeout = 30 * time.Second
	// maxDNSQuery bounds a DNS query over TCP (UDP: one datagram of up
	// to dnsUDPSize bytes).
	maxDNSQuery = 4096
	dnsUDPSize  = 1500
	// maxNames bounds the names the DNS hands synthetic addresses to.
	maxNames = 4096
	// maxRefusals bounds the distinct refusals a Report lists, besides
	// up to maxLimitRefusals distinct refusals of a limit.
	maxRefusals      = 100
	maxLimitRefusals = 16
	// maxRefusalHost and maxRefusalReason cut a refusal's host and
	// reason (in bytes; "..." marks the cut); quoted values inside a
	// reason are cut to maxQuoted first.
	maxRefusalHost   = 256
	maxRefusalReason = 200
	maxQuoted        = 64
	// dialTimeout bounds the connection to the real host.
	dialTimeout = 10 * time.Second
)

// limitPrefix starts the reason of every refusal of a bound.
const limitPrefix = "limit: "

// errLimit is what a limitReader returns past its budget.
var errLimit = errors.New("limit reached")

// limitReader passes reads on while its budget lasts: the budget is set
// before each head (request or ClientHello) and lifted after it. It sits
// under the connection's bufio.Reader, so the budget counts bytes taken
// from the socket, look-ahead included.
type limitReader struct {
	r    io.Reader
	left int64
	hit  bool
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		l.hit = true
		return 0, errLimit
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// limit sets the budget to n bytes from now.
func (l *limitReader) limit(n int64) { l.left, l.hit = n, false }

// lift removes the budget.
func (l *limitReader) lift() { l.left, l.hit = math.MaxInt64, false }

// clip cuts s to n bytes (at a rune start), marking the cut with "...".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && s[i]&0xc0 == 0x80 {
		i--
	}
	return s[:i] + "..."
}

// quoted is a value of the sandbox's for a refusal's reason: printable,
// cut, quoted.
func quoted(s string) string {
	if len(s) > 4*maxQuoted {
		s = s[:4*maxQuoted]
	}
	return strconv.Quote(clip(printable(s), maxQuoted))
}
