//go:build linux && !runtimeonly

package main

import (
	"fmt"
	"io"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// stdioTransport is the MCP SDK's transport over stdin and stdout, with
// stdin read through Go's poller when it is a pipe (what an agent that
// starts `mcp serve` gives it). The SDK reads its input in a goroutine of
// its own and hands each message on: on a blocking descriptor that
// goroutine's next read(2) holds its thread and processor, and the
// message waits for another thread to wake and take it over (0.19-0.27 ms
// per call measured on this project's 2-core VM; 0.10-0.14 ms through the
// poller, where the reading goroutine parks instead: docs/performance.md).
// Anything else (a terminal, a file, a socket) is read as the SDK's
// StdioTransport reads it.
func stdioTransport() mcp.Transport {
	if t := pipeTransport(0, os.Stdout); t != nil {
		return t
	}
	return &mcp.StdioTransport{}
}

// pipeTransport reads the pipe fd through the poller and writes out; nil
// when fd is not a pipe or cannot be opened again. The pipe is opened
// anew (/proc/self/fd/N, non-blocking): a description of our own, so
// O_NONBLOCK is never set on the one the caller shares with us. The
// descriptor fd stays open; closing the connection closes our own.
func pipeTransport(fd int, out io.Writer) mcp.Transport {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return nil
	}
	in, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", fd), os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	return &mcp.IOTransport{Reader: in, Writer: nopWriteCloser{out}}
}

// nopWriteCloser leaves stdout open when the connection closes, as the
// SDK's StdioTransport does.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
