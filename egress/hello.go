package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// TLS record layer (RFC 8446 5.1): ContentType, legacy version, length.
const (
	recordHeaderLen        = 5
	recordChangeCipherSpec = 20
	recordAlert            = 21
	recordHandshake        = 22
	recordApplicationData  = 23
	// maxPlaintextRecord bounds a record of the handshake's plaintext
	// (a ClientHello's); maxRecord any record (TLS 1.2 ciphertext).
	maxPlaintextRecord   = 1 << 14
	maxRecord            = 1<<14 + 2048
	handshakeClientHello = 1
	handshakeServerHello = 2
)

// helloRetryRandom is the ServerHello.random of a HelloRetryRequest
// (RFC 8446 4.1.3).
var helloRetryRandom = []byte{
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
	0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
}

// refusal is a reason to refuse what the sandbox sent, as an error.
type refusal string

func (r refusal) Error() string { return string(r) }

func refusalf(format string, a ...any) error { return refusal(fmt.Sprintf(format, a...)) }

// isRecordHeader reports whether h (at least 5 bytes) starts a TLS
// record: a known content type, version 3.x, a length a record may have.
func isRecordHeader(h []byte) bool {
	return h[0] >= recordChangeCipherSpec && h[0] <= recordApplicationData && h[1] == 3 &&
		int(binary.BigEndian.Uint16(h[3:5])) <= maxRecord
}

// readClientHello reads from br exactly the TLS records that carry one
// handshake message, which must be a ClientHello, and returns them as
// read (raw) and the message (its handshake header included). No byte
// past the records is taken. A record of another type, a message of
// another type, or more handshake data after the ClientHello in its
// record is a refusal (an error of type refusal); a message over
// maxHelloBytes is errLimit.
func readClientHello(br *bufio.Reader) (raw, msg []byte, err error) {
	for {
		h, err := br.Peek(recordHeaderLen)
		if err != nil {
			return nil, nil, err
		}
		n := int(binary.BigEndian.Uint16(h[3:5]))
		switch {
		case h[0] != recordHandshake:
			return nil, nil, refusalf("TLS: a record of type %d inside the ClientHello", h[0])
		case h[1] != 3:
			return nil, nil, refusal("TLS: unreadable ClientHello (record version)")
		case n == 0 || n > maxPlaintextRecord:
			return nil, nil, refusal("TLS: unreadable ClientHello (record length)")
		case len(msg)+n > maxHelloBytes:
			// (raw, headers included, is bounded by the connection's
			// limitReader.)
			return nil, nil, errLimit
		}
		start := len(raw)
		raw = append(raw, make([]byte, recordHeaderLen+n)...)
		if _, err := io.ReadFull(br, raw[start:]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, nil, err
		}
		msg = append(msg, raw[start+recordHeaderLen:]...)
		if len(msg) < 4 {
			continue
		}
		if msg[0] != handshakeClientHello {
			return nil, nil, refusalf("TLS: handshake message of type %d, not a ClientHello", msg[0])
		}
		total := 4 + (int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3]))
		if total > maxHelloBytes {
			return nil, nil, errLimit
		}
		if len(msg) == total {
			return raw, msg, nil
		}
		if len(msg) > total {
			return nil, nil, refusal("TLS: more handshake data after the ClientHello")
		}
	}
}

// helloServerName returns the server name of a ClientHello message (its
// handshake header included; "" when it has no server_name extension).
// It walks the message's structure (RFC 8446 4.1.2, RFC 6066 3) and
// refuses what a server might read another name from: a server_name
// list with an entry that is not a host_name, or with more than one
// entry, or a repeated extension.
func helloServerName(msg []byte) (string, error) {
	bad := refusal("TLS: unreadable ClientHello")
	if len(msg) < 4 {
		return "", bad
	}
	p := parser(msg[4:])
	if !p.skip(2+32) || !p.skipVec(1) || !p.skipVec(2) || !p.skipVec(1) {
		return "", bad
	}
	if len(p) == 0 {
		return "", nil // no extensions
	}
	exts, ok := p.vec(2)
	if !ok || len(p) != 0 {
		return "", bad
	}
	seen := map[uint16]bool{}
	name := ""
	for len(exts) > 0 {
		typ, ok := exts.u16()
		if !ok {
			return "", bad
		}
		data, ok := exts.vec(2)
		if !ok {
			return "", bad
		}
		if seen[typ] {
			return "", refusalf("TLS: extension %d repeated in the ClientHello", typ)
		}
		seen[typ] = true
		if typ != 0 { // server_name
			continue
		}
		list, ok := data.vec(2)
		if !ok || len(data) != 0 || len(list) == 0 {
			return "", bad
		}
		nameType, ok := list.u8()
		if !ok {
			return "", bad
		}
		if nameType != 0 {
			return "", refusalf("TLS: a server_name entry of type %d (not host_name)", nameType)
		}
		host, ok := list.vec(2)
		if !ok || len(host) == 0 {
			return "", bad
		}
		if len(list) != 0 {
			return "", refusal("TLS: more than one server_name entry")
		}
		name = string(host)
	}
	return name, nil
}

// parser reads the vectors of a TLS structure.
type parser []byte

func (p *parser) skip(n int) bool {
	if len(*p) < n {
		return false
	}
	*p = (*p)[n:]
	return true
}

func (p *parser) u8() (byte, bool) {
	if len(*p) < 1 {
		return 0, false
	}
	b := (*p)[0]
	*p = (*p)[1:]
	return b, true
}

func (p *parser) u16() (uint16, bool) {
	if len(*p) < 2 {
		return 0, false
	}
	v := binary.BigEndian.Uint16(*p)
	*p = (*p)[2:]
	return v, true
}

// vec reads a vector with a length prefix of n bytes (1 or 2).
func (p *parser) vec(n int) (parser, bool) {
	var l int
	switch n {
	case 1:
		b, ok := p.u8()
		if !ok {
			return nil, false
		}
		l = int(b)
	default:
		v, ok := p.u16()
		if !ok {
			return nil, false
		}
		l = int(v)
	}
	if len(*p) < l {
		return nil, false
	}
	v := (*p)[:l]
	*p = (*p)[l:]
	return v, true
}

func (p *parser) skipVec(n int) bool { _, ok := p.vec(n); return ok }

// checkClientHello reads a ClientHello from br and returns its records
// and server name, which two parsers agree on: helloServerName (which
// refuses ambiguous server_name lists) and the standard library's.
func checkClientHello(br *bufio.Reader) (raw []byte, sni string, err error) {
	raw, msg, err := readClientHello(br)
	if err != nil {
		return nil, "", err
	}
	if sni, err = helloServerName(msg); err != nil {
		return nil, "", err
	}
	std, err := clientHelloSNI(bytes.NewReader(raw))
	if err != nil || std != sni {
		return nil, "", refusal("TLS: unreadable ClientHello")
	}
	return raw, sni, nil
}

// serverAnswer reads the host's first TLS record (after the ClientHello
// was passed to it), whole, and says whether it is a HelloRetryRequest
// (the client then sends a second ClientHello). Anything but a handshake
// or alert record is a refusal: the host does not speak TLS, and nothing
// more of the client's may reach it.
func serverAnswer(u net.Conn) (rec []byte, retry bool, err error) {
	_ = u.SetReadDeadline(time.Now().Add(serverHelloTimeout))
	defer u.SetReadDeadline(time.Time{})
	var h [recordHeaderLen]byte
	if _, err := io.ReadFull(u, h[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, false, refusal("TLS: the host did not answer the ClientHello with TLS")
		}
		return nil, false, err
	}
	if (h[0] != recordHandshake && h[0] != recordAlert) || !isRecordHeader(h[:]) {
		return nil, false, refusal("TLS: the host did not answer the ClientHello with TLS")
	}
	rec = make([]byte, recordHeaderLen+int(binary.BigEndian.Uint16(h[3:5])))
	copy(rec, h[:])
	if _, err := io.ReadFull(u, rec[recordHeaderLen:]); err != nil {
		return nil, false, err
	}
	// ServerHello: type, length (4), legacy_version (2), random (32).
	body := rec[recordHeaderLen:]
	retry = h[0] == recordHandshake && len(body) >= 4+2+32 && body[0] == handshakeServerHello &&
		bytes.Equal(body[6:38], helloRetryRandom)
	return rec, retry, nil
}

var errHelloRead = errors.New("client hello read")

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
