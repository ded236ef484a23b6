// Package linux is skillrun's Linux back end: OCI containers through runc's
// libcontainer, as root or rootless. It is the only package that imports
// runc (the container init lives in its subpackage containerinit, the
// host's prepared device folder in devdir).
//
// # Life of a container
//
// Create (container.go) validates the ID, starts the host preparation
// (Prepare: the RCU grace period of the first cgroup migration, paid in
// the background), loads the spec (the caller's in-memory spec, else the
// bundle's config.json), drops the linux.resources the caller cannot apply
// when cgroups are not delegated (with a warning; CgroupLimits says so in
// advance), and takes the per-ID flock (lock.go) that serialises the
// mutating verbs across processes. specconv turns the spec into
// libcontainer's config, relaxConfig (compat.go) smooths what runc 1.1
// accepted and libcontainer 1.5 refuses, saying what it changed. A spec
// with the network allowlist annotation gets its egress server's handoff
// connection (egress.go), or a detached helper that serves a plain bundle.
// orphan.go records where the cgroups will be before libcontainer makes
// them, so a create killed half-way can still be cleaned up. The init is
// spawned (`BINARY init`: containerinit, before anything else of the
// binary is initialised) and left blocked on the exec fifo; poststart and
// poststop hooks are kept in the state directory (hooks.go), because
// skillrun, not libcontainer, runs them; prestart hooks see the state
// through the hook shim (hookshim.go). Standard I/O is the caller's files,
// streams or a console socket (io.go).
//
// Start (verbs.go) opens the fifo: the init execs the process, poststart
// hooks run. Run is Create and Start in one, waiting for the process
// (foreground) and reporting what it observed (runtime.ExitInfo: status,
// signal, rusage, the cgroup's memory peak and OOM kills). Exec adds a
// process (process.go), State and List read libcontainer's state with
// runc's JSON, Kill signals the init or every process, Pause and Resume
// freeze the cgroup, Update applies a resources update (update.go), Events
// streams stats and OOM events (events.go). Delete removes a stopped
// container, kills a created one first and a running one only with force,
// runs the poststop hooks and removes the state, cgroups and lock file.
//
// # Lifetime guard
//
// Guard (guard.go, guard_client.go; runtime.Guarder) ties a container to the calling
// process: a guard process per caller (a C stub, package guardstub, until
// it has work) force-deletes the caller's registered containers when the
// caller dies, and kills a container at its deadline even while the
// caller lives. Create and Run of a guarded ID wait until the guard
// exists. The skill runner guards every sandbox; the OCI verbs never do,
// but the egress helper of an annotated bundle (EgressHelperMain) guards
// its container in keep mode: killed when the helper dies, its state left
// to its caller.
//
// # Host preparation
//
// Prepare starts slow kernel work early (runtime.Preparer); DevDir gives
// the device folder a skill's /dev binds (runtime.DevDirProvider);
// Features describes this build and this caller (features.go).
package linux
