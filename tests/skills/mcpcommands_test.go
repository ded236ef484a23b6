//go:build integration

package skills_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/tests/internal/hostcheck"
)

// commandCall is a run_command, write_file or read_file result.
type commandCall struct {
	r     *mcp.CallToolResult
	res   execResult
	files []struct {
		Path string `json:"path"`
		Size int64  `json:"size"`
	}
}

func callCommandTool(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) commandCall {
	t.Helper()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s %v: %v", name, args, err)
	}
	c := commandCall{r: r}
	if name == "run_command" && r.StructuredContent != nil {
		b, _ := json.Marshal(r.StructuredContent)
		var files struct {
			Files []struct {
				Path string `json:"path"`
				Size int64  `json:"size"`
			} `json:"files"`
		}
		if err := json.Unmarshal(b, &c.res); err != nil || json.Unmarshal(b, &files) != nil {
			t.Fatalf("structured content of %s: %v", name, err)
		}
		c.files = files.Files
	}
	return c
}

func (c commandCall) text() string {
	var b strings.Builder
	for _, x := range c.r.Content {
		if tc, ok := x.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// workspaceRoot is a folder for --workspace-root the mode's server owns.
func workspaceRoot(t *testing.T, m *mode) string {
	dir, err := os.MkdirTemp("", "skillrun-ws-root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o711)
	if m.user != nil {
		os.Chown(dir, m.uid, m.gid)
	}
	return dir
}

func entries(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestMCPCommandsAgentFlow: an Agent-Skills-style skill used over MCP as
// an agent uses it, with the SDK's client over stdio: read SKILL.md, write
// an input file, run the skill's scripts with arguments, read the output
// back; a symlink planted by a command is not followed by read_file; a
// cancelled command's sandbox goes; a client that goes away mid-command
// leaves neither the command running nor the session's workspace. Checked
// on the host.
func TestMCPCommandsAgentFlow(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		ix := newPyIndex(t)
		ix.addWheel(t, "tabulate", "0.9.0", tabulateStandIn)
		root := workspaceRoot(t, m)
		cs := m.mcpServe(t, "--watch", "0", "--pool", "0", "--workspace-root", root, "--env-cache", envCache(t, m), "--pip-index-url", ix.url())
		ctx := context.Background()

		// A skill every call of which the grants refuse has no tool
		// (fetch-url: no network); save-note, which needs a workspace,
		// has one: each session gets one.
		if lr, err := cs.ListTools(ctx, nil); err == nil {
			listed := map[string]bool{}
			for _, tl := range lr.Tools {
				listed[tl.Name] = true
			}
			if listed["fetch-url"] || !listed["save-note"] {
				t.Errorf("tools %v: want fetch-url hidden, save-note listed", listed)
			}
		}
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "skill://table-report/SKILL.md"})
		if err != nil || !strings.Contains(rr.Contents[0].Text, "scripts/csv_to_json.py") {
			t.Fatalf("read SKILL.md: %v", err)
		}
		if c := callCommandTool(t, ctx, cs, "write_file", map[string]any{"path": "data/sales.csv", "content": salesCSV}); c.r.IsError {
			t.Fatalf("write_file: %s", c.text())
		}
		c := callCommandTool(t, ctx, cs, "run_command", map[string]any{"skill": "table-report",
			"command": []string{"python3", "scripts/csv_to_json.py", "data/sales.csv", "rows.json"}})
		if c.r.IsError || !c.res.OK || len(c.files) != 1 || c.files[0].Path != "rows.json" {
			t.Fatalf("run csv_to_json: %s", c.text())
		}
		if len(c.text()) > 300 || !strings.HasPrefix(c.text(), "3 rows written to rows.json\n[exit 0") {
			t.Errorf("text block %q: want the output and a one-line status", c.text())
		}
		c = callCommandTool(t, ctx, cs, "run_command", map[string]any{"skill": "table-report",
			"command": "python3 scripts/render_table.py rows.json report.md --column amount --title Sales"})
		if c.r.IsError {
			t.Fatalf("run render_table: %s", c.text())
		}
		c = callCommandTool(t, ctx, cs, "read_file", map[string]any{"path": "report.md"})
		if c.r.IsError || !strings.HasPrefix(c.text(), "# Sales\n") {
			t.Fatalf("read_file report.md: %s", c.text())
		}
		sessions := entries(root)
		if len(sessions) != 1 {
			t.Fatalf("want one session workspace, got %v", sessions)
		}
		host, err := os.ReadFile(filepath.Join(root, sessions[0], "report.md"))
		if err != nil || !strings.Contains(string(host), "total 400") {
			t.Fatalf("report.md on the host: %v %q", err, host)
		}

		// A command plants symlinks; read_file does not follow them.
		callCommandTool(t, ctx, cs, "run_command", map[string]any{"command": "ln -s /etc/passwd leak; ln -s / root"})
		passwd, _ := os.ReadFile("/etc/passwd")
		for _, p := range []string{"leak", "root/etc/passwd"} {
			c := callCommandTool(t, ctx, cs, "read_file", map[string]any{"path": p})
			if !c.r.IsError || strings.Contains(c.text(), strings.SplitN(string(passwd), "\n", 2)[0]) {
				t.Errorf("read_file %q followed a planted symlink: %s", p, c.text())
			}
		}

		// Cancel a command mid-run: its sandbox goes.
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "sleep 30"}})
			done <- err
		}()
		m.waitContainers(t, "sandbox", 1)
		time.Sleep(200 * time.Millisecond)
		cancel()
		<-done
		sandboxes := func() (out []string) {
			for _, e := range entries(filepath.Join(m.tmp, "state")) {
				if strings.HasPrefix(e, "skill-sandbox-") { // the warm pools' are the skills'
					out = append(out, e)
				}
			}
			return out
		}
		for deadline := time.Now().Add(15 * time.Second); len(sandboxes()) != 0; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the cancelled command's sandbox is still there: %v", sandboxes())
			}
		}

		// The client goes away mid-command (stdin closed): the command's
		// sandbox is killed and the session's workspace goes.
		go func() {
			_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "sleep 66.5"}})
		}()
		sleeping := func() []hostcheck.Proc {
			return hostcheck.Procs(func(args []string) bool { return len(args) == 2 && args[0] == "sleep" && args[1] == "66.5" })
		}
		for deadline := time.Now().Add(30 * time.Second); len(sleeping()) == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the last command never started")
			}
		}
		cs.Close()
		for deadline := time.Now().Add(10 * time.Second); len(entries(root)) != 0 || len(sleeping()) != 0; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after the client went: the session's workspace %v, the command's processes %v", entries(root), sleeping())
			}
		}
	})
}

// findCanaries lists every canary.txt a sandbox's command can see,
// skipping the host's system trees bound read-only (a workspace is never
// below them): walking all of /usr took a command's whole 30 s limit once,
// while another test package loaded the disk.
const findCanaries = `find / \( -path /proc -o -path /sys -o -path /usr -o -path /dev \) -prune -o -name canary.txt -print 2>/dev/null`

// TestMCPCommandsHTTPSessions: two HTTP sessions writing the same file
// name each read back their own; a command of one cannot read the
// other's workspace (a canary there, checked from the host); SIGTERM of
// the server removes every session's workspace and sandbox.
func TestMCPCommandsHTTPSessions(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		root := workspaceRoot(t, m)
		rec := m.recordIDs()
		url, cmd := m.serveHTTP(t, "--watch", "0", "--workspace-root", root)
		ctx := context.Background()
		var cs [2]*mcp.ClientSession
		for i := range cs {
			c, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
			if err != nil {
				t.Fatal(err)
			}
			cs[i] = c
			if c := callCommandTool(t, ctx, c, "write_file", map[string]any{"path": "same.txt", "content": []string{"session A", "session B"}[i]}); c.r.IsError {
				t.Fatalf("write_file: %s", c.text())
			}
		}
		for i, want := range []string{"session A", "session B"} {
			if c := callCommandTool(t, ctx, cs[i], "read_file", map[string]any{"path": "same.txt"}); c.text() != want {
				t.Errorf("session %d reads %q, want %q", i, c.text(), want)
			}
		}
		dirs := entries(root)
		if len(dirs) != 2 {
			t.Fatalf("want two session workspaces, got %v", dirs)
		}
		var bDir string
		for _, d := range dirs {
			if b, _ := os.ReadFile(filepath.Join(root, d, "same.txt")); string(b) == "session B" {
				bDir = filepath.Join(root, d)
			}
		}
		canary := "canary-" + filepath.Base(bDir)
		if err := os.WriteFile(filepath.Join(bDir, "canary.txt"), []byte(canary), 0o644); err != nil {
			t.Fatal(err)
		}
		probe := "cat " + filepath.Join(bDir, "canary.txt") + " ../*/canary.txt /workspace/../*/canary.txt 2>&1; " + findCanaries + "; echo done"
		c := callCommandTool(t, ctx, cs[0], "run_command", map[string]any{"command": probe})
		if !strings.Contains(c.text(), "done") {
			t.Fatalf("probe did not run: %s", c.text())
		}
		if strings.Contains(c.text(), canary) || strings.Contains(string(c.res.Output), canary) {
			t.Errorf("LEAK: session A's command read session B's workspace: %s", c.text())
		}
		// SIGTERM: every workspace and sandbox goes.
		m.stopServer(t, cmd, root)
		m.assertClean(t)
		m.assertNoHostLeftovers(t, rec.finish())
	})
}

// TestMCPCommandsWarm: after a session's first command, a sandbox of its
// own waits for the next (--pool 1): the next command takes it (that
// container ends with the call, checked on the host) and answers like a
// cold one; a command that narrows its timeout runs cold.
func TestMCPCommandsWarm(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		root := workspaceRoot(t, m)
		cs := m.mcpServe(t, "--watch", "0", "--pool", "1", "--workspace-root", root)
		ctx := context.Background()
		callCommandTool(t, ctx, cs, "write_file", map[string]any{"path": "x.txt", "content": "warm"})
		if c := callCommandTool(t, ctx, cs, "run_command", map[string]any{"command": "cat x.txt"}); c.r.IsError {
			t.Fatalf("cold command: %s", c.text())
		}
		waiting := m.waitContainers(t, "sandbox", 1)
		time.Sleep(200 * time.Millisecond) // its holder files itself ready
		c := callCommandTool(t, ctx, cs, "run_command", map[string]any{"command": []string{"sh", "-c", "cat x.txt; pwd; cat"}, "stdin": "+in"})
		if c.r.IsError || !strings.HasPrefix(c.text(), "warm/workspace\n+in\n[exit 0") {
			t.Fatalf("warm command: %q", c.text())
		}
		for id := range waiting {
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(filepath.Join(m.tmp, "state", id)); err != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the warm sandbox %s did not serve the command (still there)", id)
				}
			}
		}
		if c := callCommandTool(t, ctx, cs, "run_command", map[string]any{"command": "no-such-cmd"}); c.res.ExitCode != 127 || !strings.Contains(c.text(), "command not found: no-such-cmd") {
			t.Errorf("warm command not found: %s", c.text())
		}
		if c := callCommandTool(t, ctx, cs, "run_command", map[string]any{"command": "sleep 5", "timeout_s": 0.5}); c.res.StoppedReason != "timeout" {
			t.Errorf("narrowed timeout: %s", c.text())
		}
	})
}

// TestMCPCommandsWarmPython: a python3 command of a session is served by
// a sandbox whose python3 was started ahead and waits for it (the
// session's python pool): the script's argv, stdin, working directory,
// exit status and traceback are python3's own.
func TestMCPCommandsWarmPython(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		root := workspaceRoot(t, m)
		cs := m.mcpServe(t, "--watch", "0", "--pool", "1", "--workspace-root", root)
		ctx := context.Background()
		script := "import sys\nprint(sys.argv, sys.path[0], __file__, __name__)\nprint(sys.stdin.read())\nif sys.argv[1:] == ['fail']:\n    raise ValueError('boom')\n"
		callCommandTool(t, ctx, cs, "write_file", map[string]any{"path": "s.py", "content": script})
		// The first python3 command runs cold and starts the pool.
		if c := callCommandTool(t, ctx, cs, "run_command", map[string]any{"command": []string{"python3", "s.py", "cold"}}); c.r.IsError {
			t.Fatalf("cold: %s", c.text())
		}
		var waiting map[string]int
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			waiting = m.containers("sandbox")
			if len(waiting) == 1 { // the session's python pool
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the pools did not fill: %v", waiting)
			}
		}
		time.Sleep(300 * time.Millisecond) // python3 started, waiting on stdin
		c := callCommandTool(t, ctx, cs, "run_command", map[string]any{"command": []string{"python3", "s.py", "a b"}, "stdin": "piped"})
		want := "['s.py', 'a b'] /workspace /workspace/s.py __main__\npiped\n[exit 0"
		if c.r.IsError || !strings.HasPrefix(c.text(), want) {
			t.Fatalf("warm python: %q, want prefix %q", c.text(), want)
		}
		for id := range waiting { // destroyed after the call answered
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(filepath.Join(m.tmp, "state", id)); err != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the waiting python sandbox %s did not serve the command", id)
				}
			}
		}
		time.Sleep(300 * time.Millisecond)
		c = callCommandTool(t, ctx, cs, "run_command", map[string]any{"command": []string{"python3", "s.py", "fail"}})
		if c.res.ExitCode != 1 || !strings.Contains(c.text(), "ValueError: boom") || strings.Contains(c.text(), "runpy") || strings.Contains(c.text(), "zygote") {
			t.Errorf("warm python failure: %s", c.text())
		}
	})
}

// TestMCPCommandsHTTPSessionLife: over streamable HTTP with the SDK's
// client, an agent's use of a skill (SKILL.md, an input file, a script of
// the skill with arguments, its output read back); with warm command
// sandboxes (--pool 1, per session): each session's warm sandbox has its
// own workspace bound and no other (a canary of the other session's,
// checked from the host); a session beyond --max-sessions is refused with
// the flag named and gets no workspace; a client that drops its request
// mid-command has that command's sandbox killed (its process gone, seen
// on the host); a session no request comes for within --session-timeout
// ends: its workspace and warm sandboxes go, and its place is free again.
func TestMCPCommandsHTTPSessionLife(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		root := workspaceRoot(t, m)
		rec := m.recordIDs()
		ix := newPyIndex(t)
		ix.addWheel(t, "tabulate", "0.9.0", tabulateStandIn)
		url, cmd := m.serveHTTP(t, "--watch", "0", "--pool", "1", "--workspace-root", root,
			"--max-sessions", "2", "--env-cache", envCache(t, m), "--pip-index-url", ix.url())
		ctx := context.Background()
		connect := func(url string) *mcp.ClientSession {
			c, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		var cs [2]*mcp.ClientSession
		canary := [2]string{"canary-A-" + filepath.Base(root), "canary-B-" + filepath.Base(root)}
		for i := range cs {
			cs[i] = connect(url)
			if c := callCommandTool(t, ctx, cs[i], "write_file", map[string]any{"path": "canary.txt", "content": canary[i]}); c.r.IsError {
				t.Fatalf("write_file: %s", c.text())
			}
			// The session's first command runs cold and starts its pool.
			if c := callCommandTool(t, ctx, cs[i], "run_command", map[string]any{"command": "cat canary.txt"}); c.r.IsError || !strings.HasPrefix(c.text(), canary[i]) {
				t.Fatalf("session %d cold command: %s", i, c.text())
			}
		}
		waiting := m.waitContainers(t, "sandbox", 2)
		time.Sleep(300 * time.Millisecond) // the holders file themselves ready
		probe := "cat canary.txt; cat ../*/canary.txt /workspace/../*/canary.txt 2>&1; " + findCanaries + " | xargs cat 2>/dev/null; echo done"
		for i := range cs {
			c := callCommandTool(t, ctx, cs[i], "run_command", map[string]any{"command": probe})
			if !strings.HasPrefix(c.text(), canary[i]) || !strings.Contains(c.text(), "done") {
				t.Fatalf("session %d warm probe: %s", i, c.text())
			}
			if other := canary[1-i]; strings.Contains(c.text(), other) || strings.Contains(string(c.res.Output), other) {
				t.Errorf("LEAK: session %d's warm sandbox read the other session's workspace: %s", i, c.text())
			}
		}
		for id := range waiting { // both calls were served warm
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(filepath.Join(m.tmp, "state", id)); err != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the warm sandbox %s did not serve its session's command", id)
				}
			}
		}

		// Session B uses a skill as an agent does: its instructions, an
		// input file, a script of the skill with arguments, the output.
		rr, err := cs[1].ReadResource(ctx, &mcp.ReadResourceParams{URI: "skill://table-report/SKILL.md"})
		if err != nil || !strings.Contains(rr.Contents[0].Text, "scripts/csv_to_json.py") {
			t.Fatalf("read SKILL.md over HTTP: %v", err)
		}
		callCommandTool(t, ctx, cs[1], "write_file", map[string]any{"path": "sales.csv", "content": salesCSV})
		if c := callCommandTool(t, ctx, cs[1], "run_command", map[string]any{"skill": "table-report",
			"command": []string{"python3", "scripts/csv_to_json.py", "sales.csv", "rows.json"}}); c.r.IsError || len(c.files) != 1 || c.files[0].Path != "rows.json" {
			t.Fatalf("run csv_to_json over HTTP: %s", c.text())
		}
		if c := callCommandTool(t, ctx, cs[1], "read_file", map[string]any{"path": "rows.json"}); c.r.IsError || !strings.Contains(c.text(), `"north"`) {
			t.Fatalf("read_file rows.json over HTTP: %s", c.text())
		}

		// A third session: refused, no workspace made.
		third := connect(url)
		if c := callCommandTool(t, ctx, third, "write_file", map[string]any{"path": "x.txt", "content": "x"}); !c.r.IsError || !strings.Contains(c.text(), "--max-sessions 2") {
			t.Errorf("a session beyond --max-sessions: %s", c.text())
		}
		if n := len(entries(root)); n != 2 {
			t.Errorf("workspaces after the refused session: %v", entries(root))
		}

		// Session A's client drops a request mid-command.
		body := `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 77.5"}}}`
		rctx, drop := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(rctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs[0].ID())
		req.Header.Set("MCP-Protocol-Version", cs[0].InitializeResult().ProtocolVersion)
		go func() {
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		sleeping := func() []hostcheck.Proc {
			return hostcheck.Procs(func(args []string) bool { return len(args) == 2 && args[0] == "sleep" && args[1] == "77.5" })
		}
		for deadline := time.Now().Add(30 * time.Second); len(sleeping()) == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the dropped request's command never started")
			}
		}
		drop()
		for deadline := time.Now().Add(5 * time.Second); len(sleeping()) != 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the command of a dropped request still runs 5 s later: %v", sleeping())
			}
		}

		m.stopServer(t, cmd, root)

		// A session no request comes for within --session-timeout ends
		// (a second server, on the same state root once the first has
		// gone): its workspace and warm sandboxes go and its place is
		// free again.
		idleRoot := workspaceRoot(t, m)
		idleURL, idleCmd := m.serveHTTP(t, "--watch", "0", "--pool", "1", "--workspace-root", idleRoot,
			"--session-timeout", "2s", "--max-sessions", "1")
		idle := connect(idleURL)
		if c := callCommandTool(t, ctx, idle, "run_command", map[string]any{"command": "touch made"}); c.r.IsError || len(entries(idleRoot)) != 1 {
			t.Fatalf("idle session's command: %s, workspaces %v", c.text(), entries(idleRoot))
		}
		for deadline := time.Now().Add(20 * time.Second); len(entries(idleRoot)) != 0 || len(m.containers("sandbox")) != 0; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("an idle session stayed: workspaces %v, sandboxes %v", entries(idleRoot), m.containers("sandbox"))
			}
		}
		if c := callCommandTool(t, ctx, connect(idleURL), "write_file", map[string]any{"path": "x.txt", "content": "x"}); c.r.IsError {
			t.Errorf("a new session after the idle one ended: %s", c.text())
		}
		m.stopServer(t, idleCmd, idleRoot)
		m.assertClean(t)
		m.assertNoHostLeftovers(t, rec.finish())
	})
}
