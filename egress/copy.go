package egress

import (
	"io"
	"net"
)

// Bulk copies. On a host where the sandbox's client and the origin keep
// the CPUs busy, what the relay spends per byte comes straight out of
// the transfer: read(2)/write(2) through a large buffer costs less here
// than splice(2), which wakes per arriving segment and hands the
// receiver page fragments (hack/bench.sh's egress rows measure both
// against a plain forwarder). Large buffers are bounded per server: past
// maxBulkBuffers copies in flight, a copy splices instead.
const (
	bulkBufferSize = 1 << 20
	maxBulkBuffers = 4
)

// bulkBuffers hands out at most cap(free) large buffers, allocated on
// first use and kept for the server's life.
type bulkBuffers struct{ free chan []byte }

func newBulkBuffers(n int) *bulkBuffers {
	b := &bulkBuffers{free: make(chan []byte, n)}
	for range n {
		b.free <- nil
	}
	return b
}

// get returns a buffer, or false when all are in use.
func (b *bulkBuffers) get() ([]byte, bool) {
	select {
	case buf := <-b.free:
		if buf == nil {
			buf = make([]byte, bulkBufferSize)
		}
		return buf, true
	default:
		return nil, false
	}
}

func (b *bulkBuffers) put(buf []byte) { b.free <- buf }

// Hiding the TCP connection's ReaderFrom and WriterTo keeps
// io.CopyBuffer on the buffer (it would splice otherwise).
type (
	onlyReader struct{ io.Reader }
	onlyWriter struct{ io.Writer }
)

// copyBulk copies n bytes (all, to src's end, when n < 0) from src to
// dst and returns how many it copied.
func (s *server) copyBulk(dst, src *net.TCPConn, n int64) (int64, error) {
	var r io.Reader = src
	if n >= 0 {
		r = &io.LimitedReader{R: src, N: n}
	}
	buf, ok := s.bulk.get()
	if !ok {
		return dst.ReadFrom(r) // splice(2)
	}
	defer s.bulk.put(buf)
	return io.CopyBuffer(onlyWriter{dst}, onlyReader{r}, buf)
}
