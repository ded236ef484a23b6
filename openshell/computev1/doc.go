// Package computev1 is the Go code protoc generates from
// openshell/proto/compute_driver.proto: the messages and the gRPC service
// of OpenShell's compute driver API (protobuf package openshell.compute.v1).
// Do not edit the .pb.go files; change the .proto and run `make proto`.
package computev1
