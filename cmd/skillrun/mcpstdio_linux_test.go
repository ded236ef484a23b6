//go:build linux && !runtimeonly

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// A pipe is read through the poller from a description of its own: the
// caller's keeps its flags, a message arrives, and Close ends a Read
// that waits (what the SDK asks of a Connection).
func TestPipeTransport(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	fd := int(r.Fd()) // Fd leaves r blocking
	var out bytes.Buffer
	tr := pipeTransport(fd, &out)
	iot, ok := tr.(*mcp.IOTransport)
	if !ok {
		t.Fatalf("pipeTransport on a pipe = %T, want *mcp.IOTransport", tr)
	}
	in := iot.Reader.(*os.File)
	if err := in.SetReadDeadline(time.Time{}); err != nil {
		t.Fatalf("the pipe is not read through the poller: SetReadDeadline: %v", err)
	}
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Fatalf("the caller's descriptor: flags %#x, %v; want O_NONBLOCK unset", fl, err)
	}
	conn, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}` + "\n"); err != nil {
		t.Fatal(err)
	}
	msg, err := conn.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if req, ok := msg.(*jsonrpc.Request); !ok || req.Method != "ping" {
		t.Fatalf("read %#v, want the ping request", msg)
	}
	if err := conn.Write(context.Background(), &jsonrpc.Response{ID: msg.(*jsonrpc.Request).ID, Result: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out.Bytes(), []byte(`"id":1`)) {
		t.Fatalf("wrote %q, want the response", out.String())
	}
	done := make(chan error, 1)
	go func() { _, err := conn.Read(context.Background()); done <- err }()
	time.Sleep(20 * time.Millisecond)
	conn.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Read after Close returned no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a waiting Read")
	}
	// The caller's descriptor is still open.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil {
		t.Fatalf("the caller's descriptor was closed: %v", err)
	}
}

// Not a pipe: nil (stdioTransport falls back to the SDK's StdioTransport).
func TestPipeTransportNotAPipe(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if tr := pipeTransport(int(f.Fd()), os.Stdout); tr != nil {
		t.Fatalf("pipeTransport on a regular file = %T, want nil", tr)
	}
}
