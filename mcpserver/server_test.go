package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/spec"
)

// fakeRT plays the container: the calculator's "expression" picks a
// behaviour. Methods the skill runner does not use are the nil embedded
// interface's (they would panic).
type fakeRT struct {
	runtime.Runtime
	mu      sync.Mutex
	started chan string // ids of containers whose program "runs"
	release chan struct{}
	deleted map[string]bool
	ended   map[string]error // how each run ended
	// launches are the warm sandboxes launched (container ID, time).
	launches []launch
}

type launch struct {
	id string
	at time.Time
}

func newFake() *fakeRT {
	return &fakeRT{started: make(chan string, 64), release: make(chan struct{}), deleted: map[string]bool{}, ended: map[string]error{}}
}

func (f *fakeRT) Run(ctx context.Context, id string, opts runtime.RunOpts) (int, error) {
	if len(opts.ExtraFiles) == 3 {
		f.mu.Lock()
		f.launches = append(f.launches, launch{id, time.Now()})
		f.mu.Unlock()
		// A warm sandbox: play the input holder with copies of its ends
		// (the runner closes its own once started): ready on fd 4,
		// keep fd 3 (stdin's write end) until "e" on fd 5, then read
		// the input to its end as the entry point.
		dup := func(f *os.File) *os.File {
			fd, err := syscall.Dup(int(f.Fd()))
			if err != nil {
				panic(err)
			}
			return os.NewFile(uintptr(fd), f.Name())
		}
		in, w, ready, ctl := dup(opts.Stdio.Stdin.(*os.File)), dup(opts.ExtraFiles[0]), dup(opts.ExtraFiles[1]), dup(opts.ExtraFiles[2])
		opts.Started(0)
		_, _ = ready.Write([]byte("r"))
		ready.Close()
		got := make(chan []byte, 1)
		go func() {
			defer in.Close()
			defer ctl.Close()
			r := bufio.NewReader(ctl)
			for {
				line, err := r.ReadString('\n')
				if err != nil { // the launcher is gone: "killed"
					w.Close()
					got <- nil
					return
				}
				if line == "e\n" {
					w.Close()
					break
				}
			}
			b, _ := io.ReadAll(in)
			got <- b
		}()
		select {
		case in := <-got:
			if in == nil {
				return -1, errors.New("killed by the holder")
			}
			return f.behave(ctx, id, opts, in)
		case <-ctx.Done(): // killed while waiting in the pool
			f.mu.Lock()
			f.ended[id] = ctx.Err()
			f.mu.Unlock()
			return -1, ctx.Err()
		}
	}
	in, _ := io.ReadAll(opts.Stdio.Stdin)
	if opts.Started != nil {
		opts.Started(1)
	}
	return f.behave(ctx, id, opts, in)
}

// behave plays the skill's program with its input; a command
// (spec.ExecShell ..., or a program by name: spec.Exec.Direct) is played
// by command.
func (f *fakeRT) behave(ctx context.Context, id string, opts runtime.RunOpts, in []byte) (int, error) {
	if args := opts.Spec.Process.Args; len(args) > len(spec.ExecShell) && slices.Equal(args[:len(spec.ExecShell)], spec.ExecShell) {
		f.started <- id
		return f.command(ctx, opts, args[len(spec.ExecShell):], in)
	} else if len(args) > 0 && !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, spec.SkillMount+"/") }) {
		// Not the entry point (its script is under /skill): a command.
		f.started <- id
		return f.command(ctx, opts, args, in)
	}
	var obj struct{ Expression string }
	_ = json.Unmarshal(in, &obj)
	f.started <- id
	end := func(code int, err error) (int, error) {
		f.mu.Lock()
		f.ended[id] = err
		f.mu.Unlock()
		return code, err
	}
	switch obj.Expression {
	case "fail":
		fmt.Fprint(opts.Stdio.Stderr, "boom")
		return end(1, nil)
	case "block": // until the context ends (timeout, cancellation)
		<-ctx.Done()
		return end(-1, ctx.Err())
	case "big": // an output past the text block's limit
		fmt.Fprintf(opts.Stdio.Stdout, `{"result":%q}`, bigOutput)
		return end(0, nil)
	case "barrier": // until the test releases it
		select {
		case <-f.release:
		case <-ctx.Done():
			return end(-1, ctx.Err())
		}
	}
	fmt.Fprintf(opts.Stdio.Stdout, `{"result":%q}`, obj.Expression)
	return end(0, nil)
}

// command plays a command: "write NAME TEXT" writes into the workspace's
// host folder, "block" waits for the context, "cat" echoes stdin, others
// print their arguments.
func (f *fakeRT) command(ctx context.Context, opts runtime.RunOpts, args []string, stdin []byte) (int, error) {
	ws := ""
	for _, m := range opts.Spec.Mounts {
		if m.Destination == spec.WorkspaceMount {
			ws = m.Source
		}
	}
	switch args[0] {
	case "write":
		if err := os.WriteFile(filepath.Join(ws, args[1]), []byte(args[2]), 0o644); err != nil {
			fmt.Fprint(opts.Stdio.Stderr, err)
			return 1, nil
		}
	case "block":
		<-ctx.Done()
		return -1, ctx.Err()
	case "cat":
		opts.Stdio.Stdout.Write(stdin)
		return 0, nil
	}
	fmt.Fprintf(opts.Stdio.Stdout, "ran %s in %s", strings.Join(args, " "), opts.Spec.Process.Cwd)
	return 0, nil
}

func (f *fakeRT) Delete(_ context.Context, id string, _ bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted[id] = true
	return runtime.ErrNotExist
}

// connect serves the example skills through rt on an in-memory transport
// and returns a connected client session.
func connect(t *testing.T, rt runtime.Runtime, run runner.Options) (*Server, *mcp.ClientSession) {
	t.Helper()
	return connectOpts(t, Options{Runtime: rt, Run: run})
}

// connectOpts is connect with server options (Dirs: the examples).
func connectOpts(t *testing.T, o Options) (*Server, *mcp.ClientSession) {
	t.Helper()
	o.Run.TempDir = t.TempDir()
	o.ShowRefused = true // the tests call the refused tools too
	o.Dirs = []string{filepath.Join("..", "examples", "skills")}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, connectClient(t, s, nil)
}

// connectClient connects the SDK's client to s over in-memory
// transports; setup, when not nil, readies the client first.
func connectClient(t *testing.T, s *Server, setup func(c *mcp.Client)) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	ss, err := s.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	if setup != nil {
		setup(c)
	}
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Close(); cancel() })
	return cs
}

func call(t *testing.T, ctx context.Context, cs *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, runner.Result) {
	t.Helper()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "calculator", Arguments: args})
	if err != nil {
		t.Fatalf("call %v: %v", args, err)
	}
	var res runner.Result
	if r.StructuredContent != nil {
		b, _ := json.Marshal(r.StructuredContent)
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("structured content: %v", err)
		}
	}
	return r, res
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text + "\n")
		}
	}
	return b.String()
}

func TestListToolsMatchesInspect(t *testing.T) {
	s, cs := connect(t, newFake(), runner.Options{})
	lr, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs, _ := FindSkills(filepath.Join("..", "examples", "skills"))
	withEntry := 0
	for _, d := range dirs {
		if sk, err := spec.Load(d); err == nil && sk.HasEntry() {
			withEntry++
		}
	}
	// One tool per skill with an entry point (the others are served for
	// their instructions and files only).
	if len(lr.Tools) != withEntry || withEntry == len(dirs) || withEntry < 2 {
		t.Fatalf("listed %d tools for %d example skills, %d with an entry point", len(lr.Tools), len(dirs), withEntry)
	}
	for _, lt := range lr.Tools {
		var want *mcp.Tool
		for _, d := range dirs {
			sk, err := spec.Load(d)
			if err != nil {
				t.Fatal(err)
			}
			if sk.Name == lt.Name {
				if want, err = Tool(sk); err != nil {
					t.Fatal(err)
				}
			}
		}
		if want == nil {
			t.Fatalf("tool %q is no example skill", lt.Name)
		}
		if strings.HasPrefix(lt.Description, "[refused by this server's grants: ") {
			if lt.Name != "save-note" && lt.Name != "fetch-url" {
				t.Errorf("tool %q marked refused: %s", lt.Name, lt.Description)
			}
			want.Description = lt.Description[:strings.Index(lt.Description, "] ")+2] + want.Description
		}
		a, _ := json.Marshal(lt)
		b, _ := json.Marshal(want)
		if string(a) != string(b) {
			t.Errorf("tool %q listed\n%s\nbut Tool (skill inspect --format mcp) gives\n%s", lt.Name, a, b)
		}
	}
	if len(s.Warnings()) != 0 {
		t.Errorf("warnings: %v", s.Warnings())
	}
	// The annotations follow the manifests: save-note needs a workspace,
	// fetch-url the network.
	for _, lt := range lr.Tools {
		switch lt.Name {
		case "save-note":
			if lt.Annotations.ReadOnlyHint {
				t.Errorf("save-note is readOnly")
			}
		case "fetch-url":
			if lt.Annotations.OpenWorldHint == nil || !*lt.Annotations.OpenWorldHint {
				t.Errorf("fetch-url is not openWorld")
			}
		case "calculator":
			if !lt.Annotations.ReadOnlyHint || *lt.Annotations.OpenWorldHint {
				t.Errorf("calculator annotations %+v", lt.Annotations)
			}
		}
	}
}

func TestCall(t *testing.T) {
	f := newFake()
	_, cs := connect(t, f, runner.Options{})
	ctx := context.Background()
	r, res := call(t, ctx, cs, map[string]any{"expression": "1+1"})
	if r.IsError || !res.OK || fmt.Sprint(res.Output) != "map[result:1+1]" {
		t.Errorf("ok call: isError=%v result=%+v\n%s", r.IsError, res, text(r))
	}
	r, res = call(t, ctx, cs, map[string]any{"expression": "fail"})
	if !r.IsError || res.OK || res.ExitCode != 1 || res.Stderr != "boom" || !strings.Contains(text(r), "failed: exit code 1") {
		t.Errorf("failing skill: isError=%v result=%+v\n%s", r.IsError, res, text(r))
	}
	// Input that does not match the schema never reaches a sandbox.
	n := len(f.started)
	r, _ = call(t, ctx, cs, map[string]any{"bogus": 1})
	if !r.IsError || !strings.Contains(text(r), "invalid input") || !strings.Contains(text(r), "bogus") {
		t.Errorf("bad input: isError=%v\n%s", r.IsError, text(r))
	}
	if len(f.started) != n {
		t.Errorf("bad input started a sandbox")
	}
	// An unknown tool is a protocol error or a tool error, never a run.
	if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}}); err == nil && !r.IsError {
		t.Errorf("unknown tool succeeded")
	}
}

func TestTimeoutIsToolError(t *testing.T) {
	f := newFake()
	_, cs := connect(t, f, runner.Options{Grants: spec.Grants{Timeout: 200 * time.Millisecond}})
	r, res := call(t, context.Background(), cs, map[string]any{"expression": "block"})
	if !r.IsError || res.StoppedReason != runner.StoppedTimeout || !strings.HasPrefix(text(r), "timeout: ") {
		t.Errorf("timeout: isError=%v result=%+v\n%s", r.IsError, res, text(r))
	}
}

func TestPolicyRefusalIsToolError(t *testing.T) {
	f := newFake()
	s, err := New(Options{Runtime: f, Dirs: []string{filepath.Join("..", "examples", "skills")}, Run: runner.Options{TempDir: t.TempDir()}, ShowRefused: true})
	if err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// fetch-url needs the network; the operator granted none.
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fetch-url", Arguments: map[string]any{"url": "https://example.invalid/"}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsError || !strings.HasPrefix(text(r), "policy refusal: ") || len(f.started) != 0 {
		t.Errorf("policy: isError=%v started=%d\n%s", r.IsError, len(f.started), text(r))
	}
}

func TestConcurrentCalls(t *testing.T) {
	f := newFake()
	_, cs := connect(t, f, runner.Options{})
	concurrentBarrierCalls(t, f, cs, 4)
}

func TestCancelKillsSandbox(t *testing.T) {
	f := newFake()
	_, cs := connect(t, f, runner.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "calculator", Arguments: map[string]any{"expression": "block"}})
		done <- err
	}()
	var id string
	select {
	case id = <-f.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the call never started a sandbox")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call returned %v", err)
	}
	// The server hears notifications/cancelled and the run's context ends:
	// the runtime's Run returns (it kills the container) and the runner
	// deletes it.
	f.waitCancelled(t, id)
}

// waitCancelled waits until the sandbox id's run has ended, with
// context.Canceled, and the sandbox is deleted.
func (f *fakeRT) waitCancelled(t *testing.T, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		f.mu.Lock()
		err, ended := f.ended[id]
		deleted := f.deleted[id]
		f.mu.Unlock()
		if ended && deleted {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("sandbox %s ended with %v", id, err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s not stopped after cancel (ended=%v deleted=%v)", id, ended, deleted)
		}
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(Options{Runtime: newFake(), Dirs: []string{"/nonexistent/skills"}}); err == nil || !strings.Contains(err.Error(), "/nonexistent/skills") {
		t.Errorf("missing folder: %v", err)
	}
	if _, err := New(Options{Runtime: newFake()}); err == nil {
		t.Error("no folder: no error")
	}
}

// TestWatchListChanged adds and removes a skill on disk: connected
// clients get notifications/tools/list_changed and the new list.
func TestWatchListChanged(t *testing.T) {
	root := t.TempDir()
	ex := filepath.Join("..", "examples", "skills")
	if err := os.CopyFS(filepath.Join(root, "calculator"), os.DirFS(filepath.Join(ex, "calculator"))); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Runtime: newFake(), Dirs: []string{root}, Run: runner.Options{TempDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Watch(ctx, 20*time.Millisecond, nil)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	changed := make(chan struct{}, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	names := func() string {
		lr, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, tl := range lr.Tools {
			n = append(n, tl.Name)
		}
		return strings.Join(n, ",")
	}
	if got := names(); got != "calculator" {
		t.Fatalf("tools = %s", got)
	}
	wait := func(want string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case <-changed:
				if got := names(); got == want {
					return
				}
			case <-deadline:
				t.Fatalf("no list_changed leading to tools %q (now %q)", want, names())
			}
		}
	}
	if err := os.CopyFS(filepath.Join(root, "text-stats"), os.DirFS(filepath.Join(ex, "text-stats"))); err != nil {
		t.Fatal(err)
	}
	wait("calculator,text-stats")
	if err := os.RemoveAll(filepath.Join(root, "calculator")); err != nil {
		t.Fatal(err)
	}
	wait("text-stats")
}

// concurrentBarrierCalls makes n calls at once that each block in the
// fake runtime until released, checks that all n run at the same time
// (before any is released) and that each succeeds.
func concurrentBarrierCalls(t *testing.T, f *fakeRT, cs *mcp.ClientSession, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, res := call(t, context.Background(), cs, map[string]any{"expression": "barrier"})
			if r.IsError || !res.OK {
				errs <- text(r)
			}
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case <-f.started:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d calls ran concurrently", i, n)
		}
	}
	close(f.release)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestObserveCalls: Observe learns of every call once, with the skill,
// the outcome and whether it ran warm, and never of a call's content.
func TestObserveCalls(t *testing.T) {
	var mu sync.Mutex
	var calls []Call
	_, cs := connectOpts(t, Options{Runtime: newFake(), Observe: func(c Call) {
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
	}})
	ctx := context.Background()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "calculator", Arguments: map[string]any{"expression": "1+1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "calculator", Arguments: map[string]any{"nope": 1}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 {
		t.Fatalf("observed %d calls, want 2: %+v", len(calls), calls)
	}
	if c := calls[0]; c.Skill != "calculator" || c.Outcome() != "ok" || c.Result == nil || c.Duration <= 0 || c.Warm {
		t.Errorf("first call observed as %+v (outcome %q)", c, c.Outcome())
	}
	if c := calls[1]; c.Outcome() != "bad_input" || c.Result != nil {
		t.Errorf("bad input observed as %+v (outcome %q)", c, c.Outcome())
	}
}

// TestCompactText: the text block a model reads is the skill's output and
// one status line (the envelope is in structuredContent): a calculator
// call's is under 200 characters; a failure starts with its one-line
// reason and carries the stderr tail.
func TestCompactText(t *testing.T) {
	_, cs := connect(t, newFake(), runner.Options{})
	ctx := context.Background()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "calculator", Arguments: map[string]any{"expression": "6*7"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(r); !regexp.MustCompile(`^\{"result":"6\*7"\}\n\[exit 0, \d+ ms\]\n$`).MatchString(got) || len(got) >= 200 {
		t.Errorf("text block %q", got)
	}
	if r.StructuredContent == nil || len(r.Content) != 1 {
		t.Errorf("want the envelope in structuredContent and one text block: %+v", r)
	}
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "calculator", Arguments: map[string]any{"expression": "fail"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(r); !r.IsError || !strings.HasPrefix(got, `skill "calculator" failed: exit code 1`+"\n") || !strings.Contains(got, "boom") {
		t.Errorf("failure text %q", got)
	}
}

// bigOutput is 20 KB of text past textLimit, of 3-byte runes that byte
// 8192 falls inside, both as a skill's JSON output and as a command's.
var bigOutput = "head " + strings.Repeat("ab\u20ac ", 20000/6)

// TestTextBlockCut: an output past textLimit (8 KiB) reaches the model's
// text block cut, at a rune boundary, with a line saying how many more
// bytes structuredContent holds (which has all of it); the block stays
// under 8.5 KiB. For a skill's tool and for run_command alike.
func TestTextBlockCut(t *testing.T) {
	check := func(t *testing.T, r *mcp.CallToolResult, full string) {
		t.Helper()
		got := textOf(r)
		if r.IsError || len(r.Content) != 1 {
			t.Fatalf("want one text block and no error: %q", got)
		}
		if len(got) >= 8704 {
			t.Errorf("text block is %d bytes, want under 8.5 KiB", len(got))
		}
		if !utf8.ValidString(got) {
			t.Errorf("text block cut inside a rune")
		}
		m := regexp.MustCompile(`(?s)^(.*)\n\[\.\.\. (\d+) more bytes in structuredContent\]\n\[exit 0, \d+ ms`).FindStringSubmatch(got)
		if m == nil {
			t.Fatalf("text block does not say that it was cut: ...%q", got[max(0, len(got)-200):])
		}
		if len(m[1]) > textLimit || len(m[1]) < textLimit-3 || !strings.HasPrefix(full, m[1]) {
			t.Errorf("text block keeps %d bytes of the output, want its first %d (a rune boundary at most 3 less)", len(m[1]), textLimit)
		}
		if more, _ := strconv.Atoi(m[2]); more != len(full)-len(m[1]) {
			t.Errorf("text block says %d more bytes, the output has %d more", more, len(full)-len(m[1]))
		}
		if sc := string(mustJSON(t, r.StructuredContent)); !strings.Contains(sc, bigOutput) {
			t.Errorf("structuredContent lacks the whole output (%d bytes)", len(sc))
		}
	}
	t.Run("skill", func(t *testing.T) {
		_, cs := connect(t, newFake(), runner.Options{})
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "calculator", Arguments: map[string]any{"expression": "big"}})
		if err != nil {
			t.Fatal(err)
		}
		full, _ := json.Marshal(map[string]string{"result": bigOutput})
		check(t, r, string(full))
	})
	t.Run("run_command", func(t *testing.T) {
		s, _ := commandServer(t, newFake(), Options{})
		r := callJSON(t, connectClient(t, s, nil), RunCommandTool, map[string]any{"command": []string{"cat"}, "stdin": bigOutput})
		check(t, r, bigOutput)
	})
}

// TestRefusedToolsHidden: a skill every call of which the operator's
// grants refuse (save-note needs a workspace, fetch-url the network) has
// no tool by default, with a warning; granted, it is served.
func TestRefusedToolsHidden(t *testing.T) {
	dirs := []string{filepath.Join("..", "examples", "skills")}
	s, err := New(Options{Runtime: newFake(), Dirs: dirs, Run: runner.Options{TempDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	names := map[string]bool{}
	for _, tl := range s.Tools() {
		names[tl.Name] = true
	}
	if names["save-note"] || names["fetch-url"] || !names["calculator"] {
		t.Errorf("tools %v", names)
	}
	if w := strings.Join(s.Warnings(), "\n"); !strings.Contains(w, `skill "save-note": no tool: every call would be refused: filesystem.workspace:`) {
		t.Errorf("warnings %q", w)
	}
	s2, err := New(Options{Runtime: newFake(), Dirs: dirs, Run: runner.Options{TempDir: t.TempDir(), Grants: spec.Grants{Workspace: t.TempDir(), Network: "host"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	names = map[string]bool{}
	for _, tl := range s2.Tools() {
		names[tl.Name] = true
	}
	if !names["save-note"] || !names["fetch-url"] {
		t.Errorf("granted: tools %v", names)
	}
}
