package egress

import (
	"bytes"
	"crypto/sha256"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/skillrun/skillrun/egress/policy"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := net.DialTCP("tcp4", nil, l.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestCopyBulk copies streams, some bounded by a length and some to the
// end, through a server with two large buffers: first with both taken
// (every copy splices), then more streams at once than it has buffers;
// it checks every byte, the counts, and that every buffer came back.
func TestCopyBulk(t *testing.T) {
	s := newServer(&policy.Policy{})
	s.bulk = newBulkBuffers(2)
	a, _ := s.bulk.get()
	b, _ := s.bulk.get()
	copyStreams(t, s, 2)
	s.bulk.put(a)
	s.bulk.put(b)
	copyStreams(t, s, 6)
	if n := len(s.bulk.free); n != 2 {
		t.Fatalf("%d of 2 buffers came back", n)
	}
	for range 2 {
		if b, ok := s.bulk.get(); !ok || b != nil && len(b) != bulkBufferSize {
			t.Fatalf("buffer %v %d", ok, len(b))
		}
	}
	if _, ok := s.bulk.get(); ok {
		t.Fatal("a third buffer from a pool of two")
	}
}

// copyStreams runs n copies at once through s.copyBulk.
func copyStreams(t *testing.T, s *server, n int) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB
	want := sha256.Sum256(payload)
	var wg sync.WaitGroup
	for i := range n {
		// src: written by the origin; dst: read by the client.
		origin, src := tcpPair(t)
		dst, client := tcpPair(t)
		limit := int64(-1)
		if i%2 == 0 {
			limit = int64(len(payload))
		}
		wg.Add(3)
		go func() {
			defer wg.Done()
			_, _ = origin.Write(payload)
			if limit < 0 {
				_ = origin.CloseWrite()
			}
		}()
		go func() {
			defer wg.Done()
			n, err := s.copyBulk(dst, src, limit)
			if err != nil || n != int64(len(payload)) {
				t.Errorf("stream %d: copied %d, %v; want %d", i, n, err, len(payload))
			}
			_ = dst.CloseWrite()
		}()
		go func() {
			defer wg.Done()
			got, err := io.ReadAll(client)
			if err != nil || sha256.Sum256(got) != want {
				t.Errorf("stream %d: read %d bytes (%v), not the payload", i, len(got), err)
			}
		}()
	}
	wg.Wait()
}
