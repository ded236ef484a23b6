//go:build linux

// Command mcpbench measures `skillrun mcp serve` against a cold
// `skillrun skill run` and a bare python3 start of the same hello skill:
// p50/p95/p99 of the wall time per call (sequential, after warm-up) and
// calls/s at concurrency 2. It drives the server with the official MCP Go
// SDK's client over stdio. `hack/bench.sh` runs it; a benchmark tool only.
//
// Usage: mcpbench -skillrun BIN -skill DIR [-root DIR] [-n N]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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

func run(bin, dir, root string, n int) error {
	tmp := filepath.Join(root, "tmp")
	if err := os.MkdirAll(tmp, 0o711); err != nil {
		return err
	}
	env := append(os.Environ(), "TMPDIR="+tmp)
	state := filepath.Join(root, "state")
	var rows []row

	py := func() error { return exec.Command("/usr/bin/python3", filepath.Join(dir, "scripts", "main.py")).Run() }
	cold := func() error {
		c := exec.Command(bin, "--root", state, "skill", "run", "--input", "{}", dir)
		c.Env = env
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("skill run: %v: %s", err, out)
		}
		return nil
	}
	cmd := exec.Command(bin, "--root", state, "mcp", "serve", "--watch", "0", "--skills", dir)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcpbench", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return fmt.Errorf("mcp serve: %w", err)
	}
	defer cs.Close()
	lr, err := cs.ListTools(ctx, nil)
	if err != nil || len(lr.Tools) != 1 {
		return fmt.Errorf("mcp serve lists %v (%v), want one tool", lr, err)
	}
	name := lr.Tools[0].Name
	call := func() error {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err == nil && r.IsError {
			err = fmt.Errorf("tool error: %v", r.Content)
		}
		return err
	}
	for _, c := range []struct {
		name string
		f    func() error
	}{{"bare python3", py}, {"`skill run` (cold)", cold}, {"MCP tools/call (`mcp serve`)", call}} {
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
	fmt.Printf("| hello skill, %d calls | p50 ms | p95 ms | p99 ms | calls/s at concurrency 2 |\n|---|---:|---:|---:|---:|\n", n)
	for _, r := range rows {
		fmt.Printf("| %s | %.1f | %.1f | %.1f | %.0f |\n", r.name, pct(r.samples, .5), pct(r.samples, .95), pct(r.samples, .99), r.rate)
	}
	return nil
}
