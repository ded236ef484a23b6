//go:build integration

package skills_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/tests/internal/hostcheck"
)

// mcpServe starts `skillrun mcp serve` as the mode's user with the
// example skills and the probe, and connects the SDK's client to it over
// stdio. The state root is m.tmp/state (checked by assertClean).
func (m *mode) mcpServe(t *testing.T, flags ...string) *mcp.ClientSession {
	t.Helper()
	args := append([]string{"--root", filepath.Join(m.tmp, "state"), "mcp", "serve",
		"--skills", filepath.Join(m.data, "examples", "skills"), "--skills", m.probe()}, flags...)
	cmd := m.command(args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	rec := m.recordIDs()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	c := mcp.NewClient(&mcp.Implementation{Name: "skillrun-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		cancel()
		t.Fatalf("connect to mcp serve: %v\nstderr: %s", err, stderr.String())
	}
	t.Cleanup(func() {
		// Closing stdin ends the server; it must leave nothing behind.
		if err := cs.Close(); err != nil {
			t.Logf("close: %v", err)
		}
		cancel()
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
		m.assertClean(t)
		// Seen from the host: no cgroup of any container the session
		// ran (warm and cold), no mount left.
		m.assertNoHostLeftovers(t, rec.finish())
	})
	return cs
}

// command is skillrun with args as the mode's user (not started).
func (m *mode) command(args ...string) *exec.Cmd {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR=" + m.tmp, "SKILLRUN_CANARY=canary-7f3a9"}
	if m.user != nil {
		full := append([]string{"-u", m.user.Username, "--", "env", "-i"}, env...)
		full = append(full, "HOME="+m.user.HomeDir, fmt.Sprintf("XDG_RUNTIME_DIR=/run/user/%d", m.uid), m.bin)
		return exec.Command("runuser", append(full, args...)...)
	}
	cmd := exec.Command(m.bin, args...)
	cmd.Env = append(env, "HOME="+os.Getenv("HOME"), "XDG_RUNTIME_DIR="+os.Getenv("XDG_RUNTIME_DIR"))
	return cmd
}

type mcpCall struct {
	r   *mcp.CallToolResult
	res skillResult
}

func callTool(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) mcpCall {
	t.Helper()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s %v: %v", name, args, err)
	}
	c := mcpCall{r: r}
	if r.StructuredContent != nil {
		b, _ := json.Marshal(r.StructuredContent)
		if err := json.Unmarshal(b, &c.res); err != nil {
			t.Fatalf("structured content of %s: %v", name, err)
		}
	}
	return c
}

func (c mcpCall) text() string {
	var b strings.Builder
	for _, x := range c.r.Content {
		if tc, ok := x.(*mcp.TextContent); ok {
			b.WriteString(tc.Text + "\n")
		}
	}
	return b.String()
}

// TestMCPServe drives `skillrun mcp serve` with the SDK's client over
// stdio: tools/list equals `skill inspect --format mcp`, calls run in real
// sandboxes, failures and timeouts are tool errors, calls run
// concurrently, and closing the session leaves no state behind.
func TestMCPServe(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		cs := m.mcpServe(t, "--timeout", "3s", "--show-refused")
		ctx := context.Background()
		lr, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]*mcp.Tool{}
		for _, tl := range lr.Tools {
			names[tl.Name] = tl
		}
		for _, want := range []string{"calculator", "csv-summary", "fetch-url", "json-transform", "save-note", "text-stats", "probe"} {
			if names[want] == nil {
				t.Errorf("tool %q not listed (got %d tools)", want, len(lr.Tools))
			}
		}
		// Skills without an entry point have no tool but are served for
		// their instructions and files.
		for _, none := range []string{"release-notes", "table-report"} {
			if names[none] != nil {
				t.Errorf("skill %q without an entry point has a tool", none)
			}
		}
		rl, err := cs.ListResources(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		served := map[string]bool{}
		for _, r := range rl.Resources {
			served[r.URI] = true
		}
		for _, uri := range []string{"skill://release-notes/SKILL.md", "skill://release-notes/references/style.md", "skill://table-report/scripts/render_table.py"} {
			if !served[uri] {
				t.Errorf("resource %s not served", uri)
			}
		}
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "skill://release-notes/references/style.md"})
		disk, _ := os.ReadFile(filepath.Join(m.example("release-notes"), "references", "style.md"))
		if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != string(disk) {
			t.Errorf("read skill://release-notes/references/style.md: %v", err)
		}
		insp := m.run(t, "", "skill", "inspect", "--format", "mcp", m.example("csv-summary"))
		var a, b any
		if err := json.Unmarshal([]byte(insp.stdout), &a); err != nil {
			t.Fatalf("inspect: %v\n%s", err, insp)
		}
		lb, _ := json.Marshal(names["csv-summary"])
		_ = json.Unmarshal(lb, &b)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("tools/list entry\n%v\n!= skill inspect --format mcp\n%v", b, a)
		}

		c := callTool(t, ctx, cs, "calculator", map[string]any{"expression": "2*(3+4)"})
		if c.r.IsError || !c.res.OK || !strings.Contains(string(c.res.Output), `"result": 14`) && !strings.Contains(string(c.res.Output), `"result":14`) {
			t.Errorf("calculator: %s", c.text())
		}
		c = callTool(t, ctx, cs, "calculator", map[string]any{"expression": "1/0"})
		if !c.r.IsError || c.res.OK {
			t.Errorf("calculator 1/0 is not a tool error: %s", c.text())
		}
		c = callTool(t, ctx, cs, "calculator", map[string]any{"expression": strings.Repeat("1", 5000)})
		if !c.r.IsError || !strings.Contains(c.text(), "invalid input") {
			t.Errorf("over-long input is not refused: %s", c.text())
		}
		c = callTool(t, ctx, cs, "fetch-url", map[string]any{"url": "https://example.invalid/"})
		if !c.r.IsError || !strings.HasPrefix(c.text(), "policy refusal: ") {
			t.Errorf("fetch-url without network grant: %s", c.text())
		}
		c = callTool(t, ctx, cs, "probe", map[string]any{"mode": "sleep"})
		if !c.r.IsError || c.res.StoppedReason != "timeout" || !strings.HasPrefix(c.text(), "timeout: ") {
			t.Errorf("sleep past --timeout 3s: %s", c.text())
		}

		var wg sync.WaitGroup
		start := time.Now()
		for i := 0; i < 3; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				c := callTool(t, ctx, cs, "calculator", map[string]any{"expression": fmt.Sprintf("%d+1", i)})
				if c.r.IsError || !strings.Contains(string(c.res.Output), fmt.Sprint(i+1)) {
					t.Errorf("concurrent call %d: %s", i, c.text())
				}
			}(i)
		}
		wg.Wait()
		t.Logf("3 concurrent calls: %s", time.Since(start))
	})
}

// TestMCPCancelKillsSandbox cancels a call mid-run: the server hears
// notifications/cancelled and the sandbox is killed and removed, proven
// from the host (its init process is gone, no state, no cgroup).
func TestMCPCancelKillsSandbox(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		for _, pool := range []string{"0", "1"} {
			t.Run("pool="+pool, func(t *testing.T) {
				cs := m.mcpServe(t, "--pool", pool, "--watch", "0")
				// Warm: the call takes the probe's waiting sandbox (the
				// test fails if it ran cold: that one would live on).
				var id string
				pid := 0
				if pool != "0" {
					pooled, _ := m.waitPooled(t, "probe", 1)
					for i, p := range pooled {
						id, pid = i, p
					}
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "probe", Arguments: map[string]any{"mode": "sleep"}})
					done <- err
				}()
				stateDir := filepath.Join(m.tmp, "state")
				if pid == 0 {
					for i, p := range m.waitContainers(t, "probe", 1) {
						id, pid = i, p
					}
				}
				// Let the program really start (python imports, input
				// read) before cancelling.
				time.Sleep(300 * time.Millisecond)
				cancel()
				if err := <-done; err == nil {
					t.Errorf("cancelled call returned no error")
				}
				for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					_, err := os.Stat(filepath.Join(stateDir, id))
					left := err == nil
					if !hostcheck.Alive(pid) && !left {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("after cancel: sandbox %s init pid %d alive=%v, state left %v", id, pid, hostcheck.Alive(pid), left)
					}
				}
				if dirs := hostcheck.CgroupDirsNamed(id); len(dirs) != 0 {
					t.Errorf("cgroups left after cancel: %v", dirs)
				}
				// The server still serves.
				c := callTool(t, context.Background(), cs, "calculator", map[string]any{"expression": "1+1"})
				if c.r.IsError {
					t.Errorf("call after cancel: %s", c.text())
				}
			})
		}
	})
}

// TestMCPServeHTTP serves streamable HTTP on a loopback port: the SDK's
// client lists and calls; a request naming another Host (DNS rebinding)
// is refused; a non-loopback --http address is a usage error; SIGTERM
// stops the server and leaves nothing behind.
func TestMCPServeHTTP(t *testing.T) {
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	m := self("self")
	m.tmp = privateTmp(t, m)
	if res := m.run(t, "", "mcp", "serve", "--skills", m.example("calculator"), "--http", "0.0.0.0:0"); res.code != 2 || !strings.Contains(res.stderr, "loopback") {
		t.Errorf("non-loopback --http: want exit 2 naming loopback\n%s", res)
	}
	cmd := exec.Command(binary, "--root", filepath.Join(m.tmp, "state"), "mcp", "serve", "--skills", m.example("calculator"), "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "TMPDIR="+m.tmp)
	url := startHTTPServe(t, cmd)
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lr, err := cs.ListTools(ctx, nil)
	var names []string
	if err == nil {
		for _, tl := range lr.Tools {
			names = append(names, tl.Name)
		}
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "calculator,read_file,run_command,write_file" {
		t.Fatalf("list over HTTP: %v %v", names, err)
	}
	c := callTool(t, ctx, cs, "calculator", map[string]any{"expression": "6*7"})
	if c.r.IsError || !strings.Contains(string(c.res.Output), "42") {
		t.Errorf("call over HTTP: %s", c.text())
	}
	cs.Close()
	// DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends
	// Host: evil.example; the SDK's localhost protection refuses it.
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	req.Host = "evil.example"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("request with Host evil.example: status %d, want 403", resp.StatusCode)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("server after SIGTERM: %v", err)
	}
	m.assertClean(t)
}

// TestMCPKilledServerCleanedOnRestart: the backstop of the lifetime
// guard. A server SIGKILLed mid-call loses its sandbox at once through its
// guard (tests/hostile TestLifetimeMCPServeKilled); here the guard is
// stopped first and killed after its server, so the sandbox keeps running,
// orphaned. The server started again removes the orphan's container and
// bundle at start, before any call.
func TestMCPKilledServerCleanedOnRestart(t *testing.T) {
	m := rootOnly(t, " (checks the orphaned sandbox's process from the host)")
	start := func() (*exec.Cmd, *mcp.ClientSession) {
		cmd := exec.Command(binary, "--root", filepath.Join(m.tmp, "state"), "mcp", "serve", "--skills", m.probe(), "--pool", "0")
		cmd.Env = append(os.Environ(), "TMPDIR="+m.tmp)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cmd, cs
	}
	cmd, cs := start()
	go func() {
		_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "probe", Arguments: map[string]any{"mode": "sleep"}})
	}()
	stateDir := filepath.Join(m.tmp, "state")
	pid := 0
	var id string
	for deadline := time.Now().Add(30 * time.Second); pid == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no running sandbox appeared")
		}
		ents, _ := os.ReadDir(stateDir)
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(stateDir, e.Name(), "state.json"))
			var st struct {
				Pid int `json:"init_process_pid"`
			}
			if err == nil && json.Unmarshal(b, &st) == nil && st.Pid > 0 && hostcheck.Alive(st.Pid) {
				id, pid = e.Name(), st.Pid
			}
		}
	}
	// The server's guard (its child, started with its first sandbox):
	// stopped, it cannot act on its server's end; killed after it, it
	// never will.
	guard := 0
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", cmd.Process.Pid)) // any thread forks
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		for _, f := range strings.Fields(string(b)) {
			if args, _ := os.ReadFile("/proc/" + f + "/cmdline"); strings.Contains(string(args), "__skillrun-guard") {
				guard, _ = strconv.Atoi(f)
			}
		}
	}
	if guard == 0 {
		t.Fatal("control: the server has no lifetime guard")
	}
	if err := syscall.Kill(guard, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if err := syscall.Kill(guard, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	t.Cleanup(func() {
		// Should the test fail, do not leave the orphan sleeping.
		if hostcheck.Alive(pid) && hostcheck.InOtherPidNS(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, d := range hostcheck.CgroupDirsNamed(id) {
			hostcheck.RemoveCgroup(d)
		}
	})
	time.Sleep(200 * time.Millisecond)
	if !hostcheck.Alive(pid) {
		t.Fatalf("the sandbox died with its server and guard: the test proves nothing")
	}
	cmd2, cs2 := start()
	_ = cmd2
	// Cleaned at start: before any tool call.
	if _, err := cs2.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); hostcheck.Alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("orphaned sandbox %s (pid %d) still alive after the restart", id, pid)
		}
	}
	if dirs := hostcheck.CgroupDirsNamed(id); len(dirs) != 0 {
		t.Errorf("cgroups left: %v", dirs)
	}
	cs2.Close()
	m.assertClean(t)
}

// TestMCPMalformedAndHugeRequests feeds the stdio server raw frames: a
// 2 MiB argument is refused as invalid input and the server goes on; a
// malformed JSON-RPC frame, or one over the SDK's frame limit, ends the
// stream (the SDK cannot resynchronise), and the server exits 1 with a
// one-line reason, leaving nothing behind.
func TestMCPMalformedAndHugeRequests(t *testing.T) {
	frame := func(v any) string { b, _ := json.Marshal(v); return string(b) + "\n" }
	init := frame(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}}) +
		frame(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	callFrame := func(id int, expr string) string {
		return frame(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{
			"name": "calculator", "arguments": map[string]any{"expression": expr}}})
	}
	forEachMode(t, func(t *testing.T, m *mode) {
		args := []string{"--root", filepath.Join(m.tmp, "state"), "mcp", "serve", "--watch", "0", "--skills", m.example("calculator")}
		// Huge but framed: a tool error, then the next call is served.
		// stdin stays open until the answers to ids 2 and 3 are in: EOF on stdin
		// ends the session, dropping calls in flight.
		cmd := m.command(args...)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		var errb strings.Builder
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			_, _ = io.WriteString(stdin, init+callFrame(2, strings.Repeat("1", 2<<20))+callFrame(3, "6*7"))
		}()
		var out strings.Builder
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 8<<20)
		timer := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
		// Calls run concurrently: the answers come in any order.
		for seen := 0; seen < 2 && sc.Scan(); {
			out.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), `"id":2`) || strings.Contains(sc.Text(), `"id":3`) {
				seen++
			}
		}
		stdin.Close()
		_ = cmd.Wait()
		timer.Stop()
		res := result{stdout: out.String(), stderr: errb.String(), code: cmd.ProcessState.ExitCode()}
		if res.code != 0 || !strings.Contains(res.stdout, `"id":2`) || !strings.Contains(res.stdout, "invalid input") || !strings.Contains(res.stdout, `\"result\":42`) {
			t.Errorf("2 MiB argument then a call:\nexit %d\nstdout: %.600s\nstderr: %s", res.code, res.stdout, res.stderr)
		}
		m.assertClean(t)
		for name, bad := range map[string]string{
			"malformed": "{this is not json\n",
			"oversized": callFrame(4, strings.Repeat("1", 40<<20)),
		} {
			res := m.run(t, init+bad+callFrame(5, "1+1"), args...)
			// Warnings (rootless: the runtime's "cgroups are not
			// delegated", logged once, as the warm pools launch) aside,
			// stderr is the reason, on one line.
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(res.stderr), "\n") {
				if !strings.Contains(l, "level=warning") && !strings.HasPrefix(l, "skillrun: warning: ") {
					lines = append(lines, l)
				}
			}
			if res.code != 1 || len(lines) != 1 || !strings.Contains(res.stderr, "mcp serve: ") || strings.Contains(res.stdout, `"id":5`) {
				t.Errorf("%s frame: want exit 1 with a one-line reason\nexit %d\nstdout: %.300s\nstderr: %s", name, res.code, res.stdout, res.stderr)
			}
			m.assertClean(t)
		}
	})
}
