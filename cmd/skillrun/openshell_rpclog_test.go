//go:build openshell

package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/skillrun/skillrun/openshell/computev1"
)

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
