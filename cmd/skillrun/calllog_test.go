package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/skillrun/skillrun/mcpserver"
	pb "github.com/skillrun/skillrun/openshell/computev1"
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

// TestRPCLogger: one info line per driver RPC with the method, the
// sandbox ID the request names, the duration and the status code.
func TestRPCLogger(t *testing.T) {
	e, buf := jsonLogEnv()
	unary, stream := e.rpcLogger()
	info := &grpc.UnaryServerInfo{FullMethod: "/openshell.compute.v1.ComputeDriver/StopSandbox"}
	_, _ = unary(context.Background(), &pb.StopSandboxRequest{SandboxId: "sb-1"}, info, func(context.Context, any) (any, error) {
		return nil, status.Error(codes.NotFound, "sandbox \"sb-1\" not found")
	})
	m := logLine(t, buf)
	if m["rpc"] != info.FullMethod || m["id"] != "sb-1" || m["code"] != "NotFound" || m["msg"] != "openshell rpc" || m["level"] != "info" {
		t.Errorf("log line %v", m)
	}
	if _, ok := m["duration_ms"]; !ok {
		t.Errorf("no duration_ms in %v", m)
	}
	err := stream(nil, nil, &grpc.StreamServerInfo{FullMethod: "/openshell.compute.v1.ComputeDriver/WatchSandboxes"}, func(any, grpc.ServerStream) error { return nil })
	if m := logLine(t, buf); err != nil || m["rpc"] != "/openshell.compute.v1.ComputeDriver/WatchSandboxes" || m["code"] != "OK" {
		t.Errorf("stream log line %v (err %v)", m, err)
	}
	if got := sandboxIDOf(&pb.CreateSandboxRequest{Sandbox: &pb.DriverSandbox{Id: "sb-2"}}); got != "sb-2" {
		t.Errorf("sandboxIDOf(create) = %q", got)
	}
	if got := rpcFields("m", "", time.Now(), errors.New("plain")); got["code"] != "Unknown" || got["error"] != "plain" {
		t.Errorf("rpcFields of a plain error = %v", got)
	}
}
