//go:build linux

// The `mcp serve` under test: its start, its call log, its pool seen from /proc.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/mcpserver"
)

// srv is a running `mcp serve`.
type srv struct {
	cs    *mcp.ClientSession
	name  string // the skill's tool
	pid   int
	state string // its --root
	log   *callLog
}

// server starts `mcp serve --pool pool` on dir with state as its root.
func server(bin, dir, state string, env []string, pool int) (*srv, error) {
	cmd := exec.Command(bin, "--root", state, "mcp", "serve", "--watch", "0", "--skills", dir, "--pool", strconv.Itoa(pool))
	cmd.Env = env
	log := &callLog{}
	cmd.Stderr = log
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcpbench", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, fmt.Errorf("mcp serve: %w", err)
	}
	lr, err := cs.ListTools(ctx, nil)
	var names []string
	if err == nil {
		for _, t := range lr.Tools {
			names = append(names, t.Name)
		}
	}
	name, ok := skillTool(names)
	if !ok {
		cs.Close()
		return nil, fmt.Errorf("mcp serve lists %v (%v), want one skill tool", lr, err)
	}
	return &srv{cs: cs, name: name, pid: cmd.Process.Pid, state: state, log: log}, nil
}

// skillTool is the one skill's tool among the tools a server lists (the
// others are its command and file tools).
func skillTool(names []string) (string, bool) {
	var skills []string
	for _, n := range names {
		if n != mcpserver.RunCommandTool && n != mcpserver.WriteFileTool && n != mcpserver.ReadFileTool {
			skills = append(skills, n)
		}
	}
	if len(skills) != 1 {
		return "", false
	}
	return skills[0], true
}

// callLog passes the server's stderr on and counts its call lines,
// warm and cold (`mcp tool call ... warm=true|false`).
type callLog struct {
	mu         sync.Mutex
	buf        []byte
	warm, cold int
}

func (l *callLog) Write(p []byte) (int, error) {
	os.Stderr.Write(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		if line := l.buf[:i]; bytes.Contains(line, []byte("mcp tool call")) {
			if bytes.Contains(line, []byte(" warm=true")) {
				l.warm++
			} else if bytes.Contains(line, []byte(" warm=false")) {
				l.cold++
			}
		}
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

func (l *callLog) counts() (warm, cold int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.warm, l.cold
}

// commandCaller runs the hello script with run_command in the skill's
// sandbox.
func commandCaller(s *srv) func() error {
	return func() error {
		r, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: mcpserver.RunCommandTool,
			Arguments: map[string]any{"skill": s.name, "command": []string{"python3", "scripts/main.py"}, "stdin": "{}"}})
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

// waitQuiet waits until the state root holds exactly n sandboxes, each
// waiting for a call: the pool refilled, and nothing else launching or
// being removed (at most 30 s).
func waitQuiet(state string, n int) error {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		have := sandboxes(state)
		if have == n && pooled(state) == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the pool did not settle at %d waiting sandboxes (%d there, %d waiting)", n, have, pooled(state))
		}
	}
}

// sandboxes counts the containers of the state root (not its @locks).
func sandboxes(state string) int {
	ents, _ := os.ReadDir(state)
	n := 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "@") {
			n++
		}
	}
	return n
}

func caller(s *srv) func() error {
	return func() error {
		r, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: s.name, Arguments: map[string]any{}})
		if err == nil && r.IsError {
			err = fmt.Errorf("tool error: %v", r.Content)
		}
		return err
	}
}
