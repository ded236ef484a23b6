// Package runtime is skillrun's engine contract: one small Runtime interface
// over the OCI verbs, the State type with runc's JSON keys, sentinel errors
// worded as libcontainer words them, and container ID validation.
//
// Two back ends implement it: runtime/linux (runc's libcontainer, root and
// rootless) and runtime/darwin (Seatbelt via sandbox-exec). runtime/fake is
// an in-memory implementation for CLI tests, and runtime/runtimetest is the
// conformance suite every implementation runs.
//
// # The call sequence containerd makes
//
// containerd's runc shim (containerd-shim-runc-v2, through go-runc) drives a
// container's life with these calls, all with the global flags
// `--root /run/containerd/runc/<ns> --log <bundle>/log.json --log-format json`
// and the bundle as working directory:
//
//  1. create --bundle B --pid-file B/init.pid [--console-socket S] ID
//     The call's stdio become the container's; the runtime prints nothing.
//     It returns once the container is "created" with its init blocked.
//  2. start ID: init execs the user process. The shim, a subreaper, reaps
//     it; the runtime must not wait.
//  3. state ID, ps --format json ID, pause ID, resume ID,
//     update --resources - ID, exec --process F --detach --pid-file P ID,
//     kill [--all] ID 15 at any time while it lives.
//  4. delete ID once the init has exited, and later delete --force ID even
//     if it is already gone: that must fail with "does not exist".
//
// Errors are reported by a non-zero exit and a last
// {"level":"error","msg":...} line in the --log file.
package runtime
