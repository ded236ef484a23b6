//go:build linux

// A minimal MCP client: JSON-RPC lines written to `mcp serve`'s stdin
// and read from its stdout, nothing else. skillrun's own share of a
// warm call is measured through it: a client library's own work (the
// Go SDK's client adds 0.6-1.0 ms to a tools/call on this project's
// VM, measured against this one on the same server binary) is the
// agent's, not skillrun's, and the floor it is compared with (a
// pre-started python3) is driven the same way: a write, a read.

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
)

// rawSrv is a running `mcp serve` and its raw client. Calls are
// sequential (one in flight).
type rawSrv struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	id    int
	name  string // the skill's tool
	state string // its --root
	once  sync.Once
}

// rawServer starts `mcp serve --pool pool` on dir with state as its
// root and initialises the session.
func rawServer(bin, dir, state string, env []string, pool int) (*rawSrv, error) {
	cmd := exec.Command(bin, "--root", state, "mcp", "serve", "--watch", "0", "--skills", dir, "--pool", strconv.Itoa(pool))
	cmd.Env = env
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("mcp serve: %w", err)
	}
	s := &rawSrv{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10), state: state}
	if _, err := s.rpc("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"mcpbench-raw","version":"1"}}`); err != nil {
		s.close()
		return nil, err
	}
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`+"\n"); err != nil {
		s.close()
		return nil, err
	}
	res, err := s.rpc("tools/list", "{}")
	if err != nil {
		s.close()
		return nil, err
	}
	var l struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	_ = json.Unmarshal(res, &l)
	var names []string
	for _, t := range l.Tools {
		names = append(names, t.Name)
	}
	var ok bool
	if s.name, ok = skillTool(names); !ok {
		s.close()
		return nil, fmt.Errorf("mcp serve lists %v, want one skill tool", names)
	}
	return s, nil
}

// rpc sends a request and returns its result, skipping anything else
// the server writes (notifications).
func (s *rawSrv) rpc(method, params string) (json.RawMessage, error) {
	s.id++
	if _, err := fmt.Fprintf(s.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", s.id, method, params); err != nil {
		return nil, err
	}
	want := strconv.Itoa(s.id)
	for {
		line, err := s.out.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		var r struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		if string(r.ID) != want {
			continue // a notification, or not ours
		}
		if r.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, r.Error.Message)
		}
		return r.Result, nil
	}
}

// caller calls the skill's tool with no arguments and checks it ran.
func (s *rawSrv) caller() func() error {
	params := `{"name":` + strconv.Quote(s.name) + `,"arguments":{}}`
	return func() error {
		res, err := s.rpc("tools/call", params)
		if err == nil && !bytes.Contains(res, []byte(`"ok":true`)) {
			err = fmt.Errorf("tool error: %s", res)
		}
		return err
	}
}

func (s *rawSrv) ping() error {
	_, err := s.rpc("ping", "{}")
	return err
}

// close ends the session (stdin) and waits for the server to exit.
func (s *rawSrv) close() {
	s.once.Do(func() {
		s.in.Close()
		_ = s.cmd.Wait()
	})
}
