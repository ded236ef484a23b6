//go:build linux

// Command mcpbench measures `skillrun mcp serve`, cold (`--pool 0`) and
// warm (`--pool 2`, and a full pool for a burst), against a cold
// `skillrun skill run` and a bare python3 start of the same hello skill
// (it reads its input from stdin, then prints): p50/p95/p99 of the wall
// time per call (sequential, after warm-up), calls/s at concurrency 2,
// and a PASS/FAIL line per latency target of issue 12. It drives the
// server with the official MCP Go SDK's client over stdio and sees the
// pool fill from /proc (run it as root or as the server's user).
// `hack/bench.sh` runs it; a benchmark tool only.
//
// Usage: mcpbench -skillrun BIN -skill DIR [-root DIR] [-n N]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	bin := flag.String("skillrun", "bin/skillrun", "skillrun binary")
	dir := flag.String("skill", "", "hello skill folder (prints a JSON greeting; scripts/main.py)")
	root := flag.String("root", "", "skillrun --root (default: a temporary folder)")
	n := flag.Int("n", 60, "sequential iterations per row")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "mcpbench: -skill is required")
		os.Exit(2)
	}
	if *root == "" {
		d, err := os.MkdirTemp("", "mcpbench-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "mcpbench:", err)
			os.Exit(1)
		}
		defer os.RemoveAll(d)
		*root = d
	}
	if err := run(*bin, *dir, *root, *n); err != nil {
		fmt.Fprintln(os.Stderr, "mcpbench:", err)
		os.Exit(1)
	}
}

type row struct {
	name    string
	samples []time.Duration
	rate    float64 // calls/s at concurrency 2
}

func pct(s []time.Duration, p float64) float64 {
	c := append([]time.Duration(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	i := int(p*float64(len(c)-1) + 0.5)
	return float64(c[i].Microseconds()) / 1000
}

// timeN runs f n times after 3 warm-ups and returns the wall times.
func timeN(n int, f func() error) ([]time.Duration, error) {
	for i := 0; i < 3; i++ {
		if err := f(); err != nil {
			return nil, err
		}
	}
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t))
	}
	return out, nil
}

// rate runs f total times at concurrency 2 and returns calls/s.
func rate(total int, f func() error) (float64, error) {
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	next := make(chan struct{}, total)
	for i := 0; i < total; i++ {
		next <- struct{}{}
	}
	close(next)
	t := time.Now()
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				if err := f(); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(t)
	select {
	case err := <-errc:
		return 0, err
	default:
	}
	return float64(total) / el.Seconds(), nil
}

// server starts `mcp serve --pool pool` on dir and returns its session
// and the tool's name.
func server(bin, dir, state string, env []string, pool int) (*mcp.ClientSession, string, error) {
	cmd := exec.Command(bin, "--root", state, "mcp", "serve", "--watch", "0", "--skills", dir, "--pool", strconv.Itoa(pool))
	cmd.Env = env
	cmd.Stderr = os.Stderr
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcpbench", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, "", fmt.Errorf("mcp serve: %w", err)
	}
	lr, err := cs.ListTools(ctx, nil)
	var skills []string
	if err == nil {
		for _, t := range lr.Tools {
			if t.Name != "run_command" && t.Name != "write_file" && t.Name != "read_file" {
				skills = append(skills, t.Name)
			}
		}
	}
	if len(skills) != 1 {
		cs.Close()
		return nil, "", fmt.Errorf("mcp serve lists %v (%v), want one skill tool", lr, err)
	}
	return cs, skills[0], nil
}

// commandCaller runs the hello script with run_command in the skill's
// sandbox.
func commandCaller(cs *mcp.ClientSession, skill string) func() error {
	return func() error {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_command",
			Arguments: map[string]any{"skill": skill, "command": []string{"python3", "scripts/main.py"}, "stdin": "{}"}})
		if err == nil && r.IsError {
			err = fmt.Errorf("tool error: %v", r.Content)
		}
		return err
	}
}

// pooled counts the sandboxes of the state root that wait for a call:
// running, the input holder's child (the entry point) blocked reading
// its stdin pipe. Seen from /proc: run as root or as the server's user.
func pooled(state string) int {
	ents, _ := os.ReadDir(state)
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(state, e.Name(), "state.json"))
		var st struct {
			Pid int `json:"init_process_pid"`
		}
		if err != nil || json.Unmarshal(b, &st) != nil || st.Pid <= 0 {
			continue
		}
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", st.Pid, st.Pid))
		for _, k := range strings.Fields(string(kids)) {
			if w, _ := os.ReadFile("/proc/" + k + "/wchan"); strings.Contains(string(w), "pipe") {
				n++
				break
			}
		}
	}
	return n
}

// waitPooled waits until n sandboxes wait in the pool (at most 30 s).
func waitPooled(state string, n int) error {
	for deadline := time.Now().Add(30 * time.Second); pooled(state) < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the pool did not fill to %d (have %d)", n, pooled(state))
		}
	}
	return nil
}

func caller(cs *mcp.ClientSession, name string) func() error {
	return func() error {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err == nil && r.IsError {
			err = fmt.Errorf("tool error: %v", r.Content)
		}
		return err
	}
}

func run(bin, dir, root string, n int) error {
	tmp := filepath.Join(root, "tmp")
	if err := os.MkdirAll(tmp, 0o711); err != nil {
		return err
	}
	env := append(os.Environ(), "TMPDIR="+tmp)
	state := filepath.Join(root, "state")
	var rows []row

	py := func() error {
		c := exec.Command("/usr/bin/python3", filepath.Join(dir, "scripts", "main.py"))
		c.Stdin = strings.NewReader("{}")
		return c.Run()
	}
	cold := func() error {
		c := exec.Command(bin, "--root", state, "skill", "run", "--input", "{}", dir)
		c.Env = env
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("skill run: %v: %s", err, out)
		}
		return nil
	}
	coldExec := func() error {
		c := exec.Command(bin, "--root", state, "skill", "exec", dir, "--", "python3", "scripts/main.py")
		c.Env = env
		c.Stdin = strings.NewReader("{}")
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("skill exec: %v: %s", err, out)
		}
		return nil
	}
	// Cold MCP: every call starts its sandbox.
	cs0, name, err := server(bin, dir, state, env, 0)
	if err != nil {
		return err
	}
	defer cs0.Close()
	for _, c := range []struct {
		name string
		f    func() error
	}{{"bare python3", py}, {"`skill run` (cold)", cold}, {"MCP tools/call, cold (`--pool 0`)", caller(cs0, name)},
		{"`skill exec` (cold)", coldExec}, {"MCP run_command, cold (`--pool 0`)", commandCaller(cs0, name)}} {
		s, err := timeN(n, c.f)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		r, err := rate(max(20, n), c.f)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		rows = append(rows, row{name: c.name, samples: s, rate: r})
	}
	cs0.Close()

	// Warm: each timed call finds the pool (2) refilled, as an agent's
	// calls spaced by more than a refill do. Sustained: back to back at
	// concurrency 2, the refill (one launch at a time) sets the pace.
	cs2, name, err := server(bin, dir, state, env, 2)
	if err != nil {
		return err
	}
	defer cs2.Close()
	call := caller(cs2, name)
	// Time the call alone, not the wait for the refill.
	var ws []time.Duration
	for i := 0; i < n+3; i++ {
		if err := waitPooled(state, 2); err != nil {
			return fmt.Errorf("warm: %w", err)
		}
		t := time.Now()
		if err := call(); err != nil {
			return fmt.Errorf("warm: %w", err)
		}
		if i >= 3 {
			ws = append(ws, time.Since(t))
		}
	}
	sustained, err := rate(max(100, n), call)
	if err != nil {
		return fmt.Errorf("warm sustained: %w", err)
	}
	rows = append(rows, row{name: "MCP tools/call, warm (`--pool 2`, pool refilled before each call)", samples: ws, rate: sustained})
	// Warm commands: the session's pool of command sandboxes (started by
	// its first command), refilled before each timed call.
	cmd := commandCaller(cs2, name)
	var cws []time.Duration
	for i := 0; i < n+3; i++ {
		if i > 0 {
			// The skill's entry pool (2) and the session's python pool
			// (2): python3 started in each, blocked on its stdin.
			for deadline := time.Now().Add(30 * time.Second); pooled(state) < 4; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					return fmt.Errorf("warm commands: the pool did not fill (have %d)", pooled(state))
				}
			}
		}
		t := time.Now()
		if err := cmd(); err != nil {
			return fmt.Errorf("warm command: %w", err)
		}
		if i >= 3 {
			cws = append(cws, time.Since(t))
		}
	}
	cmdSustained, err := rate(max(100, n), cmd)
	if err != nil {
		return fmt.Errorf("warm commands sustained: %w", err)
	}
	rows = append(rows, row{name: "MCP run_command, warm (`--pool 2`, the session's pool refilled before each call)", samples: cws, rate: cmdSustained})
	cs2.Close()

	// Burst: a pool as large as the burst, full, then the burst at
	// concurrency 2: every call warm.
	const burst = 30
	csb, name, err := server(bin, dir, state, env, burst)
	if err != nil {
		return err
	}
	defer csb.Close()
	if err := waitPooled(state, burst); err != nil {
		return fmt.Errorf("burst: %w", err)
	}
	burstRate, err := rate(burst, caller(csb, name))
	if err != nil {
		return fmt.Errorf("burst: %w", err)
	}
	csb.Close()

	fmt.Printf("| hello skill, %d calls | p50 ms | p95 ms | p99 ms | calls/s at concurrency 2 |\n|---|---:|---:|---:|---:|\n", n)
	for _, r := range rows {
		fmt.Printf("| %s | %.1f | %.1f | %.1f | %.0f |\n", r.name, pct(r.samples, .5), pct(r.samples, .95), pct(r.samples, .99), r.rate)
	}
	fmt.Printf("| MCP tools/call, warm burst (`--pool %d`, full, %d calls) | | | | %.0f |\n", burst, burst, burstRate)
	fmt.Println()
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	py50, cold50, warm50 := pct(rows[0].samples, .5), pct(rows[1].samples, .5), pct(ws, .5)
	fmt.Printf("- %s: warm p50 %.1f ms below bare python3's p50 %.1f ms\n", verdict(warm50 < py50), warm50, py50)
	fmt.Printf("- %s: warm p50 at least 3x faster than a cold `skill run` (%.1fx: %.1f ms vs %.1f ms)\n", verdict(cold50 >= 3*warm50), cold50/warm50, warm50, cold50)
	fmt.Printf("- %s: at least 100 calls/s at concurrency 2, burst from a full pool (%.0f calls/s)\n", verdict(burstRate >= 100), burstRate)
	fmt.Printf("- %s: at least 100 calls/s at concurrency 2, sustained with `--pool 2` (%.0f calls/s; one refill at a time per skill sets the pace)\n", verdict(sustained >= 100), sustained)
	exec50, cmd50 := pct(rows[3].samples, .5), pct(cws, .5)
	fmt.Printf("- %s: run_command warm p50 %.1f ms below bare python3's p50 %.1f ms\n", verdict(cmd50 < py50), cmd50, py50)
	fmt.Printf("- %s: run_command warm p50 at least 3x faster than a cold `skill exec` (%.1fx: %.1f ms vs %.1f ms)\n", verdict(exec50 >= 3*cmd50), exec50/cmd50, cmd50, exec50)
	fmt.Printf("- (context) sustained at concurrency 2: run_command warm %.0f calls/s, tools/call warm %.0f calls/s\n", cmdSustained, sustained)
	return nil
}
