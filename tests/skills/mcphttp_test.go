//go:build integration

package skills_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/tests/internal/hostcheck"
)

// serveHTTP starts `mcp serve --http 127.0.0.1:0` as the mode's user on
// the examples and the probe and returns its URL and process.
func (m *mode) serveHTTP(t *testing.T, flags ...string) (string, *exec.Cmd) {
	t.Helper()
	args := append([]string{"--root", filepath.Join(m.tmp, "state"), "mcp", "serve", "--http", "127.0.0.1:0",
		"--skills", filepath.Join(m.data, "examples", "skills"), "--skills", m.probe()}, flags...)
	cmd := m.command(args...)
	return startHTTPServe(t, cmd), cmd
}

// startHTTPServe starts cmd, an `mcp serve --http` command, and returns
// the URL it reports on stderr (the rest of stderr is drained); the
// process is killed when the test ends.
func startHTTPServe(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	urlc := make(chan string, 1)
	go func() {
		buf := make([]byte, 4096)
		var all string
		for {
			n, err := errPipe.Read(buf)
			all += string(buf[:n])
			if i := strings.Index(all, "http://"); i >= 0 && strings.Contains(all[i:], "/mcp") {
				urlc <- all[i : i+strings.Index(all[i:], "/mcp")+4]
				for err == nil { // keep draining
					_, err = errPipe.Read(buf)
				}
				return
			}
			if err != nil {
				close(urlc)
				return
			}
		}
	}()
	select {
	case url := <-urlc:
		if url != "" {
			return url
		}
	case <-time.After(30 * time.Second):
	}
	t.Fatal("mcp serve --http did not report its address")
	return ""
}

// serverPid is the skillrun process of cmd: cmd itself, or as the
// rootless user the child of runuser (which a signal would end first).
func (m *mode) serverPid(cmd *exec.Cmd) int {
	if m.user == nil {
		return cmd.Process.Pid
	}
	for _, p := range hostcheck.Procs(func(args []string) bool {
		return len(args) > 2 && args[0] == m.bin && strings.Contains(strings.Join(args, " "), filepath.Join(m.tmp, "state"))
	}) {
		return p.Pid
	}
	return cmd.Process.Pid
}

// stopServer sends SIGTERM to the `mcp serve` of cmd and waits (20 s at
// most) for it to exit; each of the server's workspace roots must then be
// empty.
func (m *mode) stopServer(t *testing.T, cmd *exec.Cmd, workspaceRoots ...string) {
	t.Helper()
	if err := syscall.Kill(m.serverPid(cmd), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not exit on SIGTERM")
	}
	for _, root := range workspaceRoots {
		if left := entries(root); len(left) != 0 {
			t.Errorf("session workspaces left after SIGTERM: %v", left)
		}
	}
}

// TestMCPHTTPCalls: over streamable HTTP, with the SDK's client: a
// failing skill and bad input are tool errors; three probe calls that
// sleep past --timeout all end as timeout tool errors, together in less
// than twice the limit (they ran concurrently, one warm, two cold); a
// cancelled call (the warm one) kills its sandbox, seen from the host;
// SIGTERM ends the server and leaves no container, cgroup, mount or
// bundle behind.
func TestMCPHTTPCalls(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		rec := m.recordIDs()
		url, cmd := m.serveHTTP(t, "--timeout", "2s", "--watch", "0")
		ctx := context.Background()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c := callTool(t, ctx, cs, "calculator", map[string]any{"expression": "1/0"}); !c.r.IsError || c.res.OK || c.res.ExitCode == 0 {
			t.Errorf("failing skill over HTTP: %s", c.text())
		}
		if c := callTool(t, ctx, cs, "calculator", map[string]any{"nope": 1}); !c.r.IsError || !strings.Contains(c.text(), "invalid input") {
			t.Errorf("bad input over HTTP: %s", c.text())
		}

		m.waitPooled(t, "probe", 1)
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan string, 3)
		for i := 0; i < 3; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := callTool(t, ctx, cs, "probe", map[string]any{"mode": "sleep"})
				if !c.r.IsError || c.res.StoppedReason != "timeout" || !strings.HasPrefix(c.text(), "timeout:") {
					errs <- c.text()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Errorf("sleeping probe over HTTP, want a timeout tool error: %s", e)
		}
		if el := time.Since(start); el > 4*time.Second {
			t.Errorf("3 calls with a 2 s timeout took %v: not concurrent", el)
		}

		pooled, _ := m.waitPooled(t, "probe", 1)
		var id string
		var pid int
		for i, p := range pooled {
			id, pid = i, p
		}
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "probe", Arguments: map[string]any{"mode": "sleep"}})
			done <- err
		}()
		time.Sleep(300 * time.Millisecond)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled call over HTTP returned %v", err)
		}
		for deadline := time.Now().Add(10 * time.Second); hostcheck.Alive(pid); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the cancelled call's sandbox %s (pid %d) is still alive", id, pid)
			}
		}
		cs.Close()
		if err := syscall.Kill(m.serverPid(cmd), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("server after SIGTERM: %v", err)
		}
		m.assertClean(t)
		m.assertNoHostLeftovers(t, rec.finish())
	})
}

// TestMCPSIGTERMInFlight: SIGTERM to a stdio server with a call in flight
// (in the probe's warm sandbox, sleeping): the server exits promptly and
// cleanly, the call ends with an error, and nothing is left (the call's
// sandbox, the refilled pools, their cgroups, mounts and bundles).
func TestMCPSIGTERMInFlight(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		rec := m.recordIDs()
		cmd := m.command("--root", filepath.Join(m.tmp, "state"), "mcp", "serve", "--watch", "0",
			"--skills", filepath.Join(m.data, "examples", "skills"), "--skills", m.probe())
		var stderr strings.Builder
		cmd.Stderr = &stderr
		ctx := context.Background()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 30 * time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		pooled, _ := m.waitPooled(t, "probe", 1)
		var pid int
		for _, p := range pooled {
			pid = p
		}
		done := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "probe", Arguments: map[string]any{"mode": "sleep"}})
			done <- err
		}()
		time.Sleep(500 * time.Millisecond)
		if !hostcheck.Alive(pid) {
			t.Fatal("the call's sandbox is not running: the test proves nothing")
		}
		target := m.serverPid(cmd)
		sent := time.Now()
		if err := syscall.Kill(target, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err == nil {
				t.Error("the call in flight returned no error after SIGTERM")
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the call in flight never returned after SIGTERM")
		}
		for deadline := time.Now().Add(20 * time.Second); hostcheck.Alive(target); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("server still running 20 s after SIGTERM\n%s", stderr.String())
			}
		}
		t.Logf("server gone %v after SIGTERM", time.Since(sent))
		cs.Close()
		if hostcheck.Alive(pid) {
			t.Errorf("the call's sandbox (pid %d) outlived the server", pid)
		}
		m.assertClean(t)
		m.assertNoHostLeftovers(t, rec.finish())
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})
}
