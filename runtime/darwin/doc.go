// Package darwin is skillrun's macOS back end: the OCI config translated to
// a Seatbelt profile (package seatbelt) and run with /usr/bin/sandbox-exec,
// behind the same runtime.Runtime verbs, state JSON and errors as Linux.
//
// # Life of a container
//
// Create takes the per-ID flock, translates the config, writes
// <root>/<id>/profile.sb, creates the scratch directories that stand for
// tmpfs mounts and the exec fifo, and starts the init (`skillrun init`,
// see Init) in a new session, so the container has its own process group.
// The init applies rlimits and umask, enters the working directory,
// reports over a pipe, then blocks opening exec.fifo for writing. Create
// writes state.json (atomically) and returns: the container is created.
//
// Start opens the fifo for reading. The init writes one byte and execs
// `/usr/bin/sandbox-exec -f profile.sb -D KEY=VALUE ... -- args`, which
// applies the profile and execs the process: the PID recorded by Create is
// the sandboxed process. Exec failures come back through the fifo. Start
// removes the fifo: the container is running.
//
// The status is computed as runc computes it: stopped once the recorded
// PID is gone, is a zombie, or started at another time than the recorded
// process; created while the fifo exists; running otherwise.
//
// Kill with all signals the process group; Ps lists it; Delete kills what
// is left of it. A process that calls setsid or setpgid leaves the group.
// Pause, Resume, Update, Events and Exec return runtime.ErrNotSupported.
//
// # Portability
//
// Everything but New (darwin) compiles on Linux and darwin, and is tested
// on Linux with a launcher that runs the command without sandbox-exec.
package darwin
