//go:build integration

package skills_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/tests/internal/hostcheck"
)

// sleeperSkill writes a skill that sleeps (the marker in its argv lets the
// host find its process) under a fresh folder the mode's user can read.
func sleeperSkill(t *testing.T, m *mode, timeout string) (dir, marker string) {
	t.Helper()
	root := ownedDir(t, m)
	dir = filepath.Join(root, "sleeper")
	marker = fmt.Sprintf("sleeper-marker-%d", time.Now().UnixNano())
	files := map[string]string{
		"SKILL.md":     "---\nname: sleeper\ndescription: Sleeps for the given seconds.\n---\n# sleeper\n",
		"sandbox.yaml": fmt.Sprintf("entry: main.py\nargs: [%q]\nlimits:\n  timeout: %s\n", marker, timeout),
		"main.py":      "import json, sys, time\nreq = json.load(sys.stdin)\ntime.sleep(req.get('seconds', 0))\nprint(json.dumps({'slept': req.get('seconds', 0)}))\n",
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if m.user != nil {
		filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, m.uid, m.gid) })
	}
	return root, marker
}

// structured decodes a tool result's structured content (the skill run
// result envelope).
func structured(t *testing.T, r *mcp.CallToolResult) skillResult {
	t.Helper()
	var res skillResult
	b, err := json.Marshal(r.StructuredContent)
	if err != nil || json.Unmarshal(b, &res) != nil {
		t.Fatalf("structured content is not a skill result: %v %s", err, b)
	}
	return res
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestMCPServeStdio: an MCP client (the official Go SDK) starts
// `skillrun mcp serve` over stdio, lists the example skills as tools and
// calls them; failures, refusals and timeouts are tool errors; a call
// cancelled mid-run kills its sandbox; nothing is left when the client
// goes away.
func TestMCPServeStdio(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		extra, marker := sleeperSkill(t, m, "2s")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := m.command(ctx, "mcp", "serve", "--skills", filepath.Join(repo, "examples", "skills"), "--skills", extra)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		client := mcp.NewClient(&mcp.Implementation{Name: "skillrun-test", Version: "1"}, nil)
		session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect: %v\nserver stderr: %s", err, stderr.String())
		}
		defer session.Close()

		tools, err := session.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]*mcp.Tool{}
		for _, tl := range tools.Tools {
			names[tl.Name] = tl
		}
		for _, want := range []string{"calculator", "text-stats", "csv-summary", "fetch-url", "save-note", "sleeper"} {
			if names[want] == nil {
				t.Errorf("tool %s not listed (got %v)", want, tools.Tools)
			}
		}
		if c := names["calculator"]; c != nil {
			schema, _ := json.Marshal(c.InputSchema)
			if !strings.Contains(string(schema), `"expression"`) || c.Annotations == nil || !c.Annotations.ReadOnlyHint {
				t.Errorf("calculator tool: schema %s annotations %+v", schema, c.Annotations)
			}
			// The same definition as `skill inspect --format mcp`.
			res := m.run(t, "", "skill", "inspect", "--format", "mcp", filepath.Join(repo, "examples", "skills", "calculator"))
			var inspected map[string]any
			if json.Unmarshal([]byte(res.stdout), &inspected) != nil || fmt.Sprint(inspected["inputSchema"]) != fmt.Sprint(c.InputSchema) {
				t.Errorf("skill inspect --format mcp differs from the served tool:\n%s\n%s", res.stdout, schema)
			}
		}
		if f := names["fetch-url"]; f != nil && (f.Annotations == nil || f.Annotations.OpenWorldHint == nil || !*f.Annotations.OpenWorldHint) {
			t.Errorf("fetch-url declares network hosts but is not open-world: %+v", f.Annotations)
		}

		call := func(ctx context.Context, name string, args any) (*mcp.CallToolResult, error) {
			return session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		}
		r, err := call(ctx, "calculator", map[string]any{"expression": "6 * 7"})
		if err != nil || r.IsError {
			t.Fatalf("calculator: %v %s", err, text(r))
		}
		if res := structured(t, r); !res.OK || !strings.Contains(string(res.Output), "42") {
			t.Errorf("calculator result: %+v", res)
		}

		// Four calls at once, each in its own sandbox.
		var wg sync.WaitGroup
		errs := make(chan string, 4)
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				r, err := call(ctx, "calculator", map[string]any{"expression": fmt.Sprintf("%d + 1", i)})
				if err != nil || r.IsError || !strings.Contains(string(structured(t, r).Output), fmt.Sprint(i+1)) {
					errs <- fmt.Sprintf("concurrent call %d: %v %s", i, err, text(r))
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}

		// Bad input: a tool error naming it, nothing run.
		if r, err := call(ctx, "calculator", map[string]any{"nope": 1}); err != nil || !r.IsError || !strings.Contains(text(r), "invalid input") {
			t.Errorf("bad input: want a tool error: %v %+v", err, r)
		}
		// A skill that needs network the operator did not grant.
		if r, err := call(ctx, "fetch-url", map[string]any{"url": "https://example.com"}); err != nil || !r.IsError || structured(t, r).StoppedReason != "policy" {
			t.Errorf("fetch-url without a grant: want a policy tool error: %v %s", err, text(r))
		}
		// The skill's own timeout (2s).
		if r, err := call(ctx, "sleeper", map[string]any{"seconds": 30}); err != nil || !r.IsError || structured(t, r).StoppedReason != "timeout" {
			t.Errorf("sleeper past its timeout: want a timeout tool error: %v %s", err, text(r))
		}

		// A call the client cancels: the server kills the sandbox.
		cctx, ccancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := call(cctx, "sleeper", map[string]any{"seconds": 1.5})
			done <- err
		}()
		deadline := time.Now().Add(10 * time.Second)
		for len(hostcheck.ProcsWithArg([]string{marker})) == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if len(hostcheck.ProcsWithArg([]string{marker})) == 0 {
			t.Fatalf("the sleeper's sandbox never showed up on the host")
		}
		ccancel()
		if err := <-done; err == nil {
			t.Errorf("a cancelled call returned no error")
		}
		deadline = time.Now().Add(5 * time.Second)
		for len(hostcheck.ProcsWithArg([]string{marker})) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if p := hostcheck.ProcsWithArg([]string{marker}); len(p) > 0 {
			t.Errorf("the cancelled call's sandbox still runs: %v", p)
		}

		session.Close()
		if err := cmd.Wait(); err != nil && cmd.ProcessState == nil {
			t.Errorf("server: %v", err)
		}
		if res := m.run(t, "", "list", "--quiet"); strings.TrimSpace(res.stdout) != "" {
			t.Errorf("containers left after the server exited: %s", res.stdout)
		}
	})
}

// TestMCPServeHTTP: the same server over streamable HTTP.
func TestMCPServeHTTP(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := m.command(ctx, "mcp", "serve", "--http", "127.0.0.1:0", "--skills", filepath.Join(repo, "examples", "skills", "calculator"))
		errPipe, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			cmd.Wait()
		}()
		re := regexp.MustCompile(`http://(127\.0\.0\.1:[0-9]+)/mcp`)
		sc := bufio.NewScanner(errPipe)
		var url string
		var seen []string
		for sc.Scan() {
			seen = append(seen, sc.Text())
			if mm := re.FindStringSubmatch(sc.Text()); mm != nil {
				url = "http://" + mm[1] + "/mcp"
				break
			}
		}
		if url == "" {
			t.Fatalf("the server did not say where it listens:\n%s", strings.Join(seen, "\n"))
		}
		go func() {
			for sc.Scan() {
			}
		}()
		client := mcp.NewClient(&mcp.Implementation{Name: "skillrun-test", Version: "1"}, nil)
		session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer session.Close()
		tools, err := session.ListTools(ctx, nil)
		if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "calculator" {
			t.Fatalf("tools over HTTP: %v %+v", err, tools)
		}
		r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "calculator", Arguments: map[string]any{"expression": "2 ** 10"}})
		if err != nil || r.IsError || !strings.Contains(string(structured(t, r).Output), "1024") {
			t.Fatalf("calculator over HTTP: %v %s", err, text(r))
		}
	})
}
