// Command hopfloor is a plain TCP forwarder: the least one user-space hop
// between a client and a server costs, the floor that skillrun's egress
// relay (which also checks each connection) is read against in
// hack/bench.sh. It accepts on 127.0.0.1:PORT, connects each connection
// to TARGET and copies both ways with read(2)/write(2) through a 1 MiB
// buffer per direction, as the relay's bulk copies do. It prints its
// port, then serves until stdin closes or -lifetime passes. A benchmark
// tool only.
//
// Usage: hopfloor [-lifetime D] TARGET
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

type (
	onlyReader struct{ io.Reader }
	onlyWriter struct{ io.Writer }
)

// buffers keeps the copy buffers between connections (the relay keeps
// its own too): allocating 1 MiB per connection would be most of the
// cost of a small request.
type buffers struct{ sync.Pool }

func (b *buffers) pipe(dst, src *net.TCPConn) {
	buf, _ := b.Get().([]byte)
	if buf == nil {
		buf = make([]byte, 1<<20)
	}
	_, _ = io.CopyBuffer(onlyWriter{dst}, onlyReader{src}, buf)
	b.Put(buf) //nolint:staticcheck // a slice header's allocation is noise next to 1 MiB
	_ = dst.CloseWrite()
}

func (b *buffers) forward(c *net.TCPConn, target string) {
	defer c.Close()
	u, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{})
	go func() { b.pipe(c, u.(*net.TCPConn)); close(done) }()
	b.pipe(u.(*net.TCPConn), c)
	<-done
}

func run() error {
	lifetime := flag.Duration("lifetime", 30*time.Minute, "exit after this long")
	flag.Parse()
	if flag.NArg() != 1 {
		return fmt.Errorf("usage: hopfloor [-lifetime D] TARGET")
	}
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	fmt.Println(l.Addr().(*net.TCPAddr).Port)
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); l.Close() }()
	time.AfterFunc(*lifetime, func() { l.Close() })
	var b buffers
	for {
		c, err := l.AcceptTCP()
		if err != nil {
			return nil
		}
		go b.forward(c, flag.Arg(0))
	}
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "hopfloor:", err)
		os.Exit(1)
	}
}
