package main

import (
	"bytes"
	"encoding/json"
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
	m := logLine(t, buf)
	want := map[string]any{"level": "info", "msg": "mcp tool call", "skill": "calculator", "session": "s1", "warm": true,
		"duration_ms": float64(12), "outcome": "timeout", "exit_code": float64(4), "stopped_reason": "timeout"}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("field %s = %v, want %v (line %v)", k, m[k], v, m)
		}
	}
	if bytes.Contains(buf.Bytes(), []byte("SECRET")) {
		t.Error("the call's output reached the log")
	}
}
