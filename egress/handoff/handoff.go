// Package handoff is the runtime's side of the egress handoff socket: the
// unix socket an egress server listens on (Listen, ListenPrivate), the
// runtime's connection to it that a container's init inherits (Dial), and
// the argument that starts a detached egress server (HelperArg). It
// imports neither HTTP nor TLS: the OCI runtime links it without the
// egress server itself (package egress), which may live in another binary.
package handoff

// HelperArg is the first argument of `BINARY HelperArg ALLOW RESOLVE ...`,
// the detached egress server the Linux back end starts for a container
// whose spec asks for an allowlist through annotations (plain OCI bundles,
// as containerd or podman create them) when no caller serves it: it
// inherits the handoff listener as descriptor 3, receives the sandbox's
// sockets from the container's init and serves them until that init
// exits. The back end adds its own arguments after these two and calls
// egress.HelperMain with ALLOW and RESOLVE.
const HelperArg = "__skillrun-egress-helper"
