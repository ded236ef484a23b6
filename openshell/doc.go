// Package openshell runs OpenShell sandboxes on skillrun: it implements
// OpenShell's out-of-tree compute driver gRPC service (protobuf package
// openshell.compute.v1, generated into package computev1) on top of a
// runtime.Runtime, and serves it on a private Unix socket.
//
// Every sandbox is one container whose ID is "openshell-" followed by the
// sandbox ID. Its bundle (config.json and the rootfs unpacked from a local
// OCI image layout), its token file and its persistent workspace live under
// the driver's state directory, together with a record of the create
// request, so that a restarted driver finds its sandboxes again and Start
// can re-create a stopped sandbox's container from the retained bundle.
//
// The code is split by concern: driver.go holds the Driver, New and the
// thin gRPC handlers; store.go the state directory, the sandbox records,
// their per-sandbox locks and the observed state of a sandbox; watch.go
// the fan-out of states to WatchSandboxes streams; validate.go the checks
// of requests (with quantity.go's resource strings); lifecycle.go the
// container's creation, start, stop, deletion and the reconcile of a
// restarted driver; spec.go, image.go and archive.go build the bundle.
//
// The package never logs and never exits: errors go back to the gRPC
// caller as status codes, and to the embedding program as errors.
package openshell
