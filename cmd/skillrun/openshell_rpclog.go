//go:build openshell

package main

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	pb "github.com/skillrun/skillrun/openshell/computev1"
)

// sandboxIDOf is the sandbox a compute driver request names, or "".
func sandboxIDOf(req any) string {
	switch r := req.(type) {
	case interface{ GetSandboxId() string }:
		return r.GetSandboxId()
	case interface{ GetSandbox() *pb.DriverSandbox }:
		return r.GetSandbox().GetId()
	}
	return ""
}

// rpcFields are the fields of one driver RPC's log line.
func rpcFields(method, id string, start time.Time, err error) logrus.Fields {
	f := logrus.Fields{"rpc": method, "duration_ms": time.Since(start).Milliseconds(), "code": status.Code(err).String()}
	if id != "" {
		f["id"] = id
	}
	if err != nil {
		f["error"] = status.Convert(err).Message()
	}
	return f
}

// rpcLogger logs one line per compute driver RPC (unary, and a stream
// when it ends).
func (e *env) rpcLogger() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := h(ctx, req)
		e.log.WithFields(rpcFields(info.FullMethod, sandboxIDOf(req), start, err)).Info("openshell rpc")
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		start := time.Now()
		err := h(srv, ss)
		e.log.WithFields(rpcFields(info.FullMethod, "", start, err)).Info("openshell rpc")
		return err
	}
	return unary, stream
}
