//go:build !runtimeonly

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/skillrun/skillrun/mcpserver"
	"github.com/skillrun/skillrun/runner"
)

// jsonLogEnv is an env whose log is JSON lines in the returned buffer.
func jsonLogEnv() (*env, *bytes.Buffer) {
	var buf bytes.Buffer
	e := &env{log: logrus.New()}
	e.log.SetOutput(&buf)
	e.log.SetFormatter(&logrus.JSONFormatter{})
	return e, &buf
}

func logLine(t *testing.T, buf *bytes.Buffer) map[string]any {
	t.Helper()
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 1 {
		t.Fatalf("want one log line, got %d: %s", len(lines), buf)
	}
	var m map[string]any
	if err := json.Unmarshal(lines[0], &m); err != nil {
		t.Fatalf("log line is not JSON: %s", lines[0])
	}
	buf.Reset()
	return m
}

// TestLogMCPCall: one info line per tool call with the skill, session,
// duration and outcome fields, and nothing of the call's content.
func TestLogMCPCall(t *testing.T) {
	e, buf := jsonLogEnv()
	e.logMCPCall(mcpserver.Call{Skill: "calculator", Session: "s1", Warm: true, Duration: 12 * time.Millisecond,
		Result: &runner.Result{ExitCode: 4, StoppedReason: runner.StoppedTimeout, Output: "SECRET-OUTPUT"}})
	raw := buf.String()
	m := logLine(t, buf)
	want := map[string]any{"level": "info", "msg": "mcp tool call", "skill": "calculator", "session": "s1", "warm": true,
		"duration_ms": float64(12), "outcome": "timeout", "exit_code": float64(4), "stopped_reason": "timeout"}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("field %s = %v, want %v (line %v)", k, m[k], v, m)
		}
	}
	if strings.Contains(raw, "SECRET") {
		t.Error("the call's output reached the log")
	}
}

// TestLogCommandCalls: run_command's line names the tool, the session and
// the program (argv[0]), never its arguments; write_file and read_file get
// a line too, without their paths or content.
func TestLogCommandCalls(t *testing.T) {
	e, buf := jsonLogEnv()
	e.logMCPCall(mcpserver.Call{Tool: mcpserver.RunCommandTool, Skill: "table-report", Session: "s2", Command: "python3",
		Duration: 7 * time.Millisecond, Result: &runner.Result{OK: true, Output: "SECRET-OUTPUT"}})
	if strings.Contains(buf.String(), "SECRET") {
		t.Error("a command's output reached the log")
	}
	m := logLine(t, buf)
	want := map[string]any{"msg": "mcp tool call", "tool": "run_command", "skill": "table-report", "session": "s2",
		"command": "python3", "exit_code": float64(0), "outcome": "ok", "duration_ms": float64(7)}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("run_command field %s = %v, want %v (line %v)", k, m[k], v, m)
		}
	}
	e.logMCPCall(mcpserver.Call{Tool: mcpserver.WriteFileTool, Session: "s2", Duration: time.Millisecond})
	m = logLine(t, buf)
	if m["tool"] != "write_file" || m["session"] != "s2" || m["outcome"] != "ok" || m["skill"] != nil {
		t.Errorf("write_file line %v", m)
	}
}
