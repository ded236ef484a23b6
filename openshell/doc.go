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
// A sandbox keeps a network namespace of its own whose only way out is
// skillrun's egress allowlist (package egress, started by the runtime for
// the bundle's annotations): it grants the gateway's endpoint, by name,
// and host.openshell.internal, mapped to the gateway's address on the
// host; the supervisor's TLS client files are mounted as OpenShell's
// Docker driver mounts them.
//
// The code is split by concern: driver.go holds the Driver, New and the
// thin gRPC handlers; gateway.go the way to the gateway (endpoint, names,
// address, TLS files, listener requirements); store.go the state
// directory, the sandbox records, their per-sandbox locks and the
// observed state of a sandbox; watch.go the fan-out of states to
// WatchSandboxes streams; validate.go the checks of requests (with
// quantity.go's resource strings); lifecycle.go the container's creation,
// start, stop, deletion and the reconcile of a restarted driver; spec.go,
// image.go and archive.go build the bundle.
//
// The package never logs and never exits: errors go back to the gRPC
// caller as status codes, and to the embedding program as errors. umoci,
// which unpacks images, logs its progress through apex/log's global
// logger (to stderr unless configured): the embedding program routes it
// (skillrun's CLI sends it to its own log at debug level).
package openshell
