package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/spec"
)

// commandServer serves the examples with the command tools and a
// workspace root, over in-memory transports.
func commandServer(t *testing.T, f *fakeRT, o Options) (*Server, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "sessions")
	o.Runtime, o.Commands, o.WorkspaceRoot = f, true, root
	o.Run.TempDir = t.TempDir()
	if o.Dirs == nil {
		o.Dirs = []string{filepath.Join("..", "examples", "skills")}
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, root
}

func callJSON(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return r
}

func sessionDirs(t *testing.T, root string) []string {
	t.Helper()
	ents, _ := os.ReadDir(root)
	var out []string
	for _, e := range ents {
		out = append(out, filepath.Join(root, e.Name()))
	}
	return out
}

// oneSession connects a client to s and writes path with content into its
// workspace, the only one under root: it returns the client and that
// workspace.
func oneSession(t *testing.T, s *Server, root, path, content string) (*mcp.ClientSession, string) {
	t.Helper()
	cs := connectClient(t, s, nil)
	if r := callJSON(t, cs, WriteFileTool, map[string]any{"path": path, "content": content}); r.IsError {
		t.Fatalf("write_file: %s", text(r))
	}
	dirs := sessionDirs(t, root)
	if len(dirs) != 1 {
		t.Fatalf("want one workspace, got %v", dirs)
	}
	return cs, dirs[0]
}

// TestRunCommandSessions: each session has its own workspace: the same
// file name written by two sessions reads back as each one's own, a
// command of one session runs on its own folder, the result lists the
// files it wrote; a session's workspace goes when the session ends, and
// every one when the server closes.
func TestRunCommandSessions(t *testing.T) {
	f := newFake()
	s, root := commandServer(t, f, Options{})
	a, b := connectClient(t, s, nil), connectClient(t, s, nil)
	for _, c := range []struct {
		cs   *mcp.ClientSession
		text string
	}{{a, "from a"}, {b, "from b"}} {
		if r := callJSON(t, c.cs, WriteFileTool, map[string]any{"path": "in/data.txt", "content": c.text}); r.IsError {
			t.Fatalf("write_file: %s", text(r))
		}
	}
	for _, c := range []struct {
		cs   *mcp.ClientSession
		want string
	}{{a, "from a"}, {b, "from b"}} {
		if r := callJSON(t, c.cs, ReadFileTool, map[string]any{"path": "in/data.txt"}); r.IsError || text(r) != c.want+"\n" {
			t.Errorf("read_file: %q, want %q", text(r), c.want)
		}
	}
	if dirs := sessionDirs(t, root); len(dirs) != 2 {
		t.Fatalf("want one workspace per session, got %v", dirs)
	}
	r := callJSON(t, a, RunCommandTool, map[string]any{"command": []string{"write", "out.txt", "made by a"}})
	var res CommandResult
	if err := json.Unmarshal(mustJSON(t, r.StructuredContent), &res); err != nil || r.IsError || len(res.Files) != 1 || res.Files[0].Path != "out.txt" || res.Files[0].Size != 9 {
		t.Fatalf("run_command: %v %s", err, text(r))
	}
	if !strings.HasSuffix(text(r), "files: out.txt (9 B)]\n") || len(text(r)) > 200 {
		t.Errorf("text block %q: want the output and a one-line status", text(r))
	}
	if r := callJSON(t, b, ReadFileTool, map[string]any{"path": "out.txt"}); !r.IsError {
		t.Errorf("session b reads a's file: %s", text(r))
	}
	// The skill's sandbox: the workspace is the working directory.
	r = callJSON(t, b, RunCommandTool, map[string]any{"skill": "calculator", "command": "ls -l || true"})
	if r.IsError || !strings.Contains(text(r), "ran sh -c ls -l || true in /workspace") {
		t.Errorf("run_command in calculator's sandbox: %s", text(r))
	}
	// stdin reaches the command.
	if r := callJSON(t, b, RunCommandTool, map[string]any{"command": []string{"cat"}, "stdin": "piped"}); !strings.HasPrefix(text(r), "piped\n[exit 0") {
		t.Errorf("stdin: %q", text(r))
	}
	// Each session lists its own files as resources.
	lr, err := a.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, res := range lr.Resources {
		if strings.HasPrefix(res.URI, "workspace://") {
			mine = append(mine, res.URI)
		}
	}
	if strings.Join(mine, ",") != "workspace://in/data.txt,workspace://out.txt" {
		t.Errorf("a's workspace resources: %v", mine)
	}
	rr, err := a.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "workspace://out.txt"})
	if err != nil || rr.Contents[0].Text != "made by a" {
		t.Errorf("read workspace://out.txt: %v", err)
	}
	if _, err := b.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "workspace://out.txt"}); err == nil {
		t.Error("session b reads a's workspace://out.txt")
	}
	// A session's end removes its workspace.
	a.Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(sessionDirs(t, root)) != 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if dirs := sessionDirs(t, root); len(dirs) != 1 {
		t.Fatalf("after a's end: %v", dirs)
	}
	s.Close()
	if dirs := sessionDirs(t, root); len(dirs) != 0 {
		t.Fatalf("after Close: %v", dirs)
	}
}

// TestCloseWaitsForEndingSession: a stdio server exits as its only
// session ends; Close coming while that session's workspace is being
// removed returns only once it is gone (else the process exits midway
// and the workspace stays on the host).
func TestCloseWaitsForEndingSession(t *testing.T) {
	s, root := commandServer(t, newFake(), Options{})
	a, dir := oneSession(t, s, root, "seed", "x")
	// Enough files that removing them takes a while.
	for i := range 500 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		n := len(s.sessions)
		s.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session did not end")
		}
	}
	s.Close()
	if dirs := sessionDirs(t, root); len(dirs) != 0 {
		t.Fatalf("Close returned with a workspace still there: %v", dirs)
	}
}

// TestFileConfinement: read_file and write_file stay in the workspace:
// "..", absolute paths and symlinks (planted by a command) are refused and
// nothing outside is read or written.
func TestFileConfinement(t *testing.T) {
	s, root := commandServer(t, newFake(), Options{})
	cs := connectClient(t, s, nil)
	if r := callJSON(t, cs, WriteFileTool, map[string]any{"path": "ok.txt", "content": "x"}); r.IsError {
		t.Fatal(text(r))
	}
	ws := sessionDirs(t, root)[0]
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o644)
	os.Symlink(outside, filepath.Join(ws, "link"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "secret-link"))
	for _, p := range []string{"../x", "/etc/passwd", "link/secret", "secret-link", "link", "a/../../x", ""} {
		if r := callJSON(t, cs, ReadFileTool, map[string]any{"path": p}); !r.IsError || strings.Contains(text(r), "host secret") {
			t.Errorf("read_file %q: %s", p, text(r))
		}
	}
	for _, p := range []string{"../x", "/tmp/x", "link/new", "a/../../x"} {
		if r := callJSON(t, cs, WriteFileTool, map[string]any{"path": p, "content": "y"}); !r.IsError || !strings.HasPrefix(text(r), "path: ") {
			t.Errorf("write_file %q: %s", p, text(r))
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("written outside the workspace: %v", ents)
	}
}

// TestCommandBadInput: bad arguments are tool errors naming the field and
// nothing runs; a flood of sessions past MaxSessions is refused.
func TestCommandBadInput(t *testing.T) {
	f := newFake()
	s, _ := commandServer(t, f, Options{FileLimit: 16, WorkspaceQuota: 32, MaxSessions: 1, Run: runner.Options{Grants: spec.Grants{Timeout: 5 * time.Second}}})
	cs := connectClient(t, s, nil)
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{RunCommandTool, map[string]any{}, "command: missing"},
		{RunCommandTool, map[string]any{"command": []string{}}, "command: empty"},
		{RunCommandTool, map[string]any{"command": "  "}, "command: empty"},
		{RunCommandTool, map[string]any{"command": 5}, "command: must be"},
		{RunCommandTool, map[string]any{"command": "ls", "skill": "nope"}, "skill: \"nope\" is not served"},
		{RunCommandTool, map[string]any{"command": "ls", "stdin": strings.Repeat("x", 17)}, "stdin: 17 bytes"},
		{RunCommandTool, map[string]any{"command": "ls", "timeout_s": 6}, "timeout_s: 6"},
		{RunCommandTool, map[string]any{"command": "ls", "wat": 1}, "unknown field"},
		{WriteFileTool, map[string]any{"path": "a", "content": strings.Repeat("x", 17)}, "content: 17 bytes"},
		{WriteFileTool, map[string]any{"path": "a", "content": "!", "encoding": "base64"}, "content: not base64"},
		{WriteFileTool, map[string]any{"path": "a", "content": "x", "mode": 4095}, "mode:"},
	} {
		r := callJSON(t, cs, c.tool, c.args)
		if !r.IsError || !strings.Contains(text(r), c.want) {
			t.Errorf("%s %v: %s, want %q", c.tool, c.args, text(r), c.want)
		}
	}
	select {
	case id := <-f.started:
		t.Fatalf("a sandbox ran for bad input: %s", id)
	default:
	}
	// The quota: 32 bytes; a second 16-byte file fills it, a third is refused.
	for i, want := range []bool{false, false, true} {
		r := callJSON(t, cs, WriteFileTool, map[string]any{"path": string(rune('a'+i)) + ".txt", "content": strings.Repeat("x", 16)})
		if r.IsError != want {
			t.Errorf("write %d: %s", i, text(r))
		}
	}
	// A command may fill it past the quota (the quota is checked between
	// calls); the next call is refused.
	if r := callJSON(t, cs, RunCommandTool, map[string]any{"command": []string{"write", "big.txt", strings.Repeat("y", 20)}}); r.IsError {
		t.Errorf("command on a full workspace: %s", text(r))
	}
	if r := callJSON(t, cs, RunCommandTool, map[string]any{"command": "ls"}); !r.IsError || !strings.Contains(text(r), "--workspace-quota") {
		t.Errorf("command on a workspace over its quota: %s", text(r))
	}
	other := connectClient(t, s, nil)
	if r := callJSON(t, other, RunCommandTool, map[string]any{"command": "ls"}); !r.IsError || !strings.Contains(text(r), "--max-sessions 1") {
		t.Errorf("second session: %s", text(r))
	}
}

// TestReservedToolNames: a skill folder named like a command tool is
// skipped with a warning while the tools are served, and served when not.
func TestReservedToolNames(t *testing.T) {
	dir := t.TempDir()
	sk := filepath.Join(dir, "run_command")
	os.MkdirAll(filepath.Join(sk, "scripts"), 0o755)
	os.WriteFile(filepath.Join(sk, "SKILL.md"), []byte("---\nname: run-command\ndescription: x\n---\n"), 0o644)
	os.WriteFile(filepath.Join(sk, "scripts", "main.py"), []byte("print(1)\n"), 0o644)
	s, _ := commandServer(t, newFake(), Options{Dirs: []string{dir}})
	if len(s.Tools()) != 0 || !strings.Contains(strings.Join(s.Warnings(), "\n"), `"run_command" is the name of a tool of the server`) {
		t.Errorf("tools %v, warnings %v", s.Tools(), s.Warnings())
	}
	// Without the command tools, the folder is served as any skill.
	s2, err := New(Options{Runtime: newFake(), Dirs: []string{dir}, Run: runner.Options{TempDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if len(s2.Tools()) != 1 {
		t.Errorf("without commands: tools %v, warnings %v", s2.Tools(), s2.Warnings())
	}
}

// TestPlainWords: a command string without shell syntax becomes its
// words (sh's splitting and quotes); anything else goes to sh -c.
func TestPlainWords(t *testing.T) {
	for in, want := range map[string]string{
		"python3 scripts/x.py a.csv out.json": "python3|scripts/x.py|a.csv|out.json",
		"  ls   -l  ":                         "ls|-l",
		`render --title "Q3 Sales" 'a b'`:     "render|--title|Q3 Sales|a b",
		`echo "it's"`:                         "echo|it's",
		`x ""`:                                "x|",
		"echo $HOME":                          "",
		"a | b":                               "",
		"a; b":                                "",
		"ls *.csv":                            "",
		`echo "$x"`:                           "",
		`echo 'unterminated`:                  "",
		"a && b":                              "",
		"echo `id`":                           "",
		"cat <in":                             "",
		"a\\ b":                               "",
	} {
		words, ok := plainWords(in)
		if got := strings.Join(words, "|"); ok != (want != "") || got != want {
			t.Errorf("plainWords(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// TestObserveCommandCalls: run_command, write_file and read_file are each
// observed once, with the tool's name; run_command with its program, never
// its arguments.
func TestObserveCommandCalls(t *testing.T) {
	var mu sync.Mutex
	var calls []Call
	s, _ := commandServer(t, newFake(), Options{Observe: func(c Call) {
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
	}})
	cs := connectClient(t, s, nil)
	callJSON(t, cs, WriteFileTool, map[string]any{"path": "a.txt", "content": "SECRET-CONTENT"})
	callJSON(t, cs, RunCommandTool, map[string]any{"command": []string{"write", "out.txt", "SECRET-ARG"}})
	callJSON(t, cs, ReadFileTool, map[string]any{"path": "../escape"})
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 3 {
		t.Fatalf("observed %d calls, want 3: %+v", len(calls), calls)
	}
	if c := calls[0]; c.Tool != WriteFileTool || c.Outcome() != "ok" {
		t.Errorf("write_file observed as %+v (outcome %q)", c, c.Outcome())
	}
	if c := calls[1]; c.Tool != RunCommandTool || c.Skill != spec.BareName || c.Command != "write" || c.Outcome() != "ok" || c.Duration <= 0 {
		t.Errorf("run_command observed as %+v (outcome %q)", c, c.Outcome())
	}
	if c := calls[2]; c.Tool != ReadFileTool || c.Outcome() != "bad_input" {
		t.Errorf("read_file of ../escape observed as %+v (outcome %q)", c, c.Outcome())
	}
	if strings.Contains(fmt.Sprintf("%+v", calls), "SECRET") {
		t.Error("a call's arguments reached what is observed")
	}
}

// TestKeepWorkspaces: with KeepWorkspaces, a session's end and the
// server's Close leave its workspace and what it wrote.
func TestKeepWorkspaces(t *testing.T) {
	s, root := commandServer(t, newFake(), Options{KeepWorkspaces: true})
	a, dir := oneSession(t, s, root, "kept.txt", "kept")
	a.Close()
	time.Sleep(200 * time.Millisecond) // the session's end runs in the background
	s.Close()
	if b, err := os.ReadFile(filepath.Join(dir, "kept.txt")); err != nil || string(b) != "kept" {
		t.Errorf("after the session's end and Close: %v %q", err, b)
	}
}
