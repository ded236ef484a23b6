package hostcheck

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
)

// Origin is an HTTP server on 127.0.0.1 that logs the path and Host of
// each request it serves: the host-side verdict of the egress tests.
type Origin struct {
	Port int
	mu   sync.Mutex
	log  []string
}

// StartOrigin starts an Origin, stopped when the test ends.
func StartOrigin(t testing.TB) *Origin {
	t.Helper()
	o := &Origin{}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.log = append(o.log, r.URL.Path+" host="+r.Host)
		o.mu.Unlock()
		fmt.Fprintf(w, "hello from %s\n", r.URL.Path)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	o.Port = l.Addr().(*net.TCPAddr).Port
	return o
}

// Seen returns the log so far: "PATH host=HOST" per request.
func (o *Origin) Seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.log...)
}
