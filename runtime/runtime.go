package runtime

import (
	"context"
	"io"
	"os"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-spec/specs-go/features"
)

// Status values of a container, as runc reports them in state JSON.
const (
	StatusCreating = "creating"
	StatusCreated  = "created"
	StatusRunning  = "running"
	StatusPaused   = "paused"
	StatusStopped  = "stopped"
)

// State is the state of one container with exactly the JSON keys runc
// writes for `runc state` and `runc list --format json`.
type State struct {
	OCIVersion  string            `json:"ociVersion"`
	ID          string            `json:"id"`
	Pid         int               `json:"pid"`
	Status      string            `json:"status"`
	Bundle      string            `json:"bundle"`
	Rootfs      string            `json:"rootfs"`
	Created     time.Time         `json:"created"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Owner       string            `json:"owner"`
}

// Stdio is the standard I/O a container or exec'd process gets when the
// runtime does not allocate a terminal. Nil members mean "inherit nothing"
// (the process gets /dev/null).
type Stdio struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// CreateOpts are the options of Create and Run, named after runc's flags.
type CreateOpts struct {
	// Bundle is the absolute path of the OCI bundle (holds config.json).
	Bundle string
	// Spec, when not nil, is used instead of reading Bundle/config.json.
	Spec *specs.Spec
	// PidFile receives the container init's PID (digits only, no newline).
	PidFile string
	// ConsoleSocket is the path of a unix socket that receives the pty
	// master when process.terminal is true.
	ConsoleSocket string
	// NoPivot uses MS_MOVE + chroot instead of pivot_root.
	NoPivot bool
	// NoNewKeyring keeps the session keyring of the caller.
	NoNewKeyring bool
	// PreserveFDs passes this many extra descriptors (from 3 up) to init.
	PreserveFDs int
	// Stdio is the container's standard I/O (when no terminal is used).
	Stdio Stdio
	// ExtraFiles are passed to the container's process as descriptors
	// 3, 4, ... (after the PreserveFDs ones): a caller's own pipes, as
	// exec.Cmd.ExtraFiles. The caller keeps and closes its copies.
	ExtraFiles []*os.File
	// EgressSocket, when set, is the unix socket of an egress server
	// (package egress): the Linux back end connects to it and passes the
	// connection to the new container's init, which binds the sandbox's
	// DNS, proxy and capture sockets in its network namespace and hands
	// them over it.
	// A spec with the allowlist annotation (policy.AnnotationAllow, in
	// package egress/policy) is refused
	// without one (fail closed); back ends without network namespaces
	// refuse it.
	EgressSocket string
}

// RunOpts are the options of Run on top of CreateOpts.
type RunOpts struct {
	CreateOpts
	// Detach returns once the container is running instead of waiting.
	Detach bool
	// Keep keeps the container's state after it exits (no delete).
	Keep bool
	// Signals, when not nil, receives the signals the caller wants
	// forwarded to the container's init while Run waits for it.
	Signals <-chan os.Signal
	// Exit, when not nil, is filled with what Run observed (foreground
	// runs only).
	Exit *ExitInfo
	// Started, when not nil, is called once with the PID of the
	// container's process when it runs the configured program (foreground
	// runs only), on the goroutine that called Run, before Run waits for
	// it. It must not block: work that can wait until the container runs
	// (so as not to compete with its start for the CPU) goes there.
	Started func(pid int)
	// Exited, when not nil, is called once the container's process has
	// been waited for, with Exit filled and the wait's error (nil, or
	// the context's when its end killed the container), before the
	// container is deleted (foreground runs only): a caller may answer
	// before the clean-up is done. It must not block.
	Exited func(err error)
	// Report, when not nil, offers the caller a way to give the exit
	// status of the container's program as it learns it from inside (the
	// skill runner's input holder reports its entry point's status, then
	// waits until the caller lets it exit). A back end that can read the
	// container's usage while it is being torn down calls Report once,
	// before Started, with the function that takes that status: called (on
	// the caller's goroutine, at most once), it fills Exit from what the
	// back end knows (the status, CPU time and memory from the container's
	// cgroups) and calls Exited once the program's output has all been
	// written to Stdout and Stderr, without waiting for the container's
	// first process to be reaped; Run then waits and removes the
	// container as usual. A call after Exited does nothing. Others never
	// call Report (Exited comes after the wait), and a caller whose
	// program's side waits after its report must then let it exit once it
	// has reported, for Run waits for the container's first process; one
	// that got the function lets it exit after its answer instead, so that
	// the container's teardown does not compete with the answer.
	// Foreground runs only.
	Report func(report func(status int))
}

// ExecOpts are the options of Exec.
type ExecOpts struct {
	// Process is the process to start inside the container.
	Process *specs.Process
	// Detach returns once the process has started.
	Detach bool
	// PidFile receives the process' PID.
	PidFile string
	// ConsoleSocket receives the pty master when Process.Terminal is set.
	ConsoleSocket string
	// PreserveFDs passes this many extra descriptors (from 3 up).
	PreserveFDs int
	// Stdio is the process' standard I/O (when no terminal is used).
	Stdio Stdio
	// Signals, when not nil, are forwarded to the process while waiting.
	Signals <-chan os.Signal
	// IgnorePaused allows exec into a paused container (runc's
	// --ignore-paused); the process then starts frozen.
	IgnorePaused bool
	// SubCgroupPaths puts the process in existing sub-cgroups of the
	// container's cgroup (runc's exec --cgroup): the key "" is one path
	// for every controller (cgroup v2, or the same path in every v1
	// hierarchy), other keys are cgroup v1 controller names.
	SubCgroupPaths map[string]string
}

// EventsOpts are the options of Events.
type EventsOpts struct {
	// Interval between stats samples when Stats is false.
	Interval time.Duration
	// Stats prints a single stats event and returns.
	Stats bool
}

// Event is one line of `events` output, as runc writes it.
type Event struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	Data any    `json:"data,omitempty"`
}

// Runtime is the engine behind every OCI verb. Implementations are safe for
// concurrent use by several processes on one state root: each mutating call
// takes a per-container lock. A Runtime value itself holds only its
// configuration (root directory, cgroup driver) and may be shared.
//
// Exit statuses follow runc: Run and Exec return the process' exit status,
// 128+N when it was killed by signal N.
type Runtime interface {
	// Create sets up the container and leaves its init blocked until Start.
	Create(ctx context.Context, id string, opts CreateOpts) error
	// Start releases a created container's init to exec the user process.
	Start(ctx context.Context, id string) error
	// Run creates and starts a container; unless opts.Detach it waits for
	// it, returns its exit status and deletes it (unless opts.Keep). When
	// ctx ends before the container exits, Run kills every process of the
	// container, deletes it and returns ctx.Err() wrapped.
	Run(ctx context.Context, id string, opts RunOpts) (int, error)
	// State returns the state of a container.
	State(ctx context.Context, id string) (*State, error)
	// List returns the state of every container under the root, sorted by
	// ID. Entries that cannot be read are skipped and reported as warnings.
	List(ctx context.Context) ([]State, []error, error)
	// Kill sends sig to the container's init, or with all to every process.
	Kill(ctx context.Context, id string, sig syscall.Signal, all bool) error
	// Delete removes a stopped (or created) container; force kills a
	// running one first.
	Delete(ctx context.Context, id string, force bool) error
	// Exec runs an extra process in a running container; unless
	// opts.Detach it waits for it and returns its exit status.
	Exec(ctx context.Context, id string, opts ExecOpts) (int, error)
	// Ps returns the host PIDs of the container's processes.
	Ps(ctx context.Context, id string) ([]int, error)
	// Pause freezes every process of the container.
	Pause(ctx context.Context, id string) error
	// Resume thaws a paused container.
	Resume(ctx context.Context, id string) error
	// Events calls emit with stats events until ctx ends or the container
	// stops; with opts.Stats it emits one stats event and returns.
	Events(ctx context.Context, id string, opts EventsOpts, emit func(Event) error) error
	// Update changes the container's resource limits.
	Update(ctx context.Context, id string, r *specs.LinuxResources) error
	// Features describes what this build of the runtime supports.
	Features() (*features.Features, error)
}

// Options configure a back end; they mirror runc's global flags.
type Options struct {
	// Root is the state directory (runc's --root).
	Root string
	// SystemdCgroup asks for the systemd cgroup driver.
	SystemdCgroup bool
	// Rootless is "auto", "true" or "false" (runc's --rootless): whether
	// cgroup permission errors are ignored.
	Rootless string
	// DelegatedScope lets an unprivileged caller whose own cgroup is not
	// writable use the systemd cgroup driver (a transient scope in the
	// user's systemd instance, which delegates the memory and pids
	// controllers to it) when systemd runs, the host has the unified
	// cgroup hierarchy and the user's bus is reachable. Ignored otherwise
	// and by back ends without cgroups. The skill runner sets it.
	DelegatedScope bool
	// LimitsReported says the caller reports which limits each container
	// really got (the skill runner's result: "limits", "enforcement"): the
	// back end then does not warn when it drops the cgroup limits it
	// cannot apply (a warning that would contradict that report).
	LimitsReported bool
	// AcceptDegradation lets a back end that cannot honour every field of
	// a config (Seatbelt) run it anyway, reporting what it ignored through
	// Warn, instead of refusing it. The Linux back end honours every field
	// and ignores it.
	AcceptDegradation bool
	// Debug makes the back end ask its helpers for debug logs (the Linux
	// back end passes the level to libcontainer's nsexec and init, whose
	// lines reach logrus' standard logger, as runc --debug does).
	Debug bool
	// Warn receives non-fatal problems (limits not applied, unreadable
	// state entries). Libraries never log; the CLI decides where these go.
	// Nil discards them.
	Warn func(msg string)
	// EgressHelper, for the Linux back end, names the program it starts as
	// the detached egress server of a container whose spec asks for a
	// network allowlist through annotations and that no caller serves
	// (`PROGRAM handoff.HelperArg ...`, which must call the back end's
	// EgressHelperMain): asked only when such a container is created, its
	// error refuses that create. Nil is this program. The OCI runtime's
	// binary, which links no egress server, names the binary that does.
	EgressHelper func() (string, error)
}

// ExitInfo is what Run observed about a foreground container's life. Run
// fills it when RunOpts.Exit is not nil; fields it could not measure stay
// zero.
type ExitInfo struct {
	// Status is the exit status (128+N when killed by signal N).
	Status int `json:"status"`
	// Signal is the signal that killed the init, 0 if it exited.
	Signal syscall.Signal `json:"signal,omitempty"`
	// Wall is the time from Run's call to the init's exit.
	Wall time.Duration `json:"wall"`
	// CPU is the CPU time of the init and every process of the container
	// it reaped: rusage of the waited child, or the container's CPU
	// accounting cgroup when the run answered from its program's
	// reported status. UserCPU and SysCPU are its split, when known:
	// cgroup v1 counts the split in scheduler ticks (cpuacct.usage_user
	// and usage_sys: 4 ms at HZ=250, so a 1 ms program reads 0) and only
	// the total exactly (cpuacct.usage), so from v1 they stay zero.
	CPU     time.Duration `json:"cpu"`
	UserCPU time.Duration `json:"user_cpu"`
	SysCPU  time.Duration `json:"sys_cpu"`
	// MaxRSS is the peak resident set size in bytes of the largest process
	// (rusage), or the cgroup's memory high-water mark when cgroups are used
	// (whichever is larger).
	MaxRSS int64 `json:"max_rss"`
	// OOMKilled is true when the cgroup reported an OOM kill.
	OOMKilled bool `json:"oom_killed"`
	// PeakSinceExec says MaxRSS is the memory cgroup's high-water mark
	// since the program's exec (reset then): the program's own peak,
	// without the runtime's init before it. Otherwise MaxRSS includes it.
	PeakSinceExec bool `json:"peak_since_exec,omitempty"`
	// PidsLimitHit is true when the pids cgroup refused a fork or a
	// thread (its limit was reached at least once).
	PidsLimitHit bool `json:"pids_limit_hit,omitempty"`
	// Cgroups is true when the container was placed in its own cgroups and
	// its linux.resources limits were applied.
	Cgroups bool `json:"cgroups"`
}

// Preparer is implemented by back ends that can start slow kernel work a
// container will need before the container's configuration is known. A
// caller about to create a container (the skill runner, before it writes
// the bundle) calls Prepare as early as it can; calling it is never
// required and calling it more than once is cheap.
type Preparer interface {
	Prepare()
}

// DevDirProvider is implemented by back ends that keep a prepared host
// folder of device nodes a spec's /dev can bind read-only (one mount
// instead of one per device). DevDir returns it, made first when missing
// and this process may make it, or "" when there is none: the spec then
// gets a tmpfs /dev the runtime fills.
type DevDirProvider interface {
	DevDir() string
}

// SelfExecer is implemented by back ends whose containers can run this
// very program: a container's process whose first argument is SelfExe()
// executes the binary that started the container (the protected copy
// its init runs from, which the container cannot write), whatever the
// container's root filesystem holds, provided the container mounts
// /proc. The skill runner runs its input holder so (runner/holder).
type SelfExecer interface {
	SelfExe() string
}

// CgroupProber is implemented by back ends that can tell, before a
// container is created, whether its linux.resources limits will be
// applied (the container gets cgroups of its own) for this caller. The
// skill runner bounds memory, tasks and CPU time with rlimits instead when
// they will not be. A back end that does not implement it is assumed to
// apply them; ExitInfo.Cgroups says afterwards what really happened.
type CgroupProber interface {
	CgroupLimits() bool
}

// Guarder is implemented by back ends that can keep a container from
// outliving the process that runs it. The skill runner guards every
// sandbox it runs; the OCI verbs never do: a detached container outlives
// its runtime call, and runc does not kill a foreground container when
// runc itself is killed.
type Guarder interface {
	// Guard ties container id, before it is created, to the calling
	// process. When this process dies by any means (SIGKILL, an OOM kill,
	// a crash) before Release, another process force-deletes the
	// container within about a second (kills its processes, removes its
	// state and cgroups), then removes o.Remove and o.Lock when o.Lock is
	// not locked. Guard returns at once; Guard.Ready waits until that
	// process is in place, and Run and Create of a guarded ID wait for it
	// too (they fail when it cannot be started).
	Guard(id string, o GuardOpts) (Guard, error)
}

// GuardOpts are what a guard removes after its container when the
// process that ran it died.
type GuardOpts struct {
	// Lock is a file the caller holds an exclusive flock on for as long
	// as it lives (the skill runner's bundle owner file): the paths of
	// Remove, then Lock itself, are removed only when Lock can be locked
	// (nobody holds it any more) and is the guarding user's.
	Lock string
	// Remove are removed (as trees) after the container.
	Remove []string
}

// Guard is one guarded container (Guarder).
type Guard interface {
	// SetDeadline has the guard kill every process of the container at
	// t, even while the caller lives (stuck, or stopped): the backstop of
	// the caller's own wall-clock limit. The zero time removes it.
	SetDeadline(t time.Time) error
	// Ready returns once the guard is in place (Guard may start it in
	// the background), or why it cannot be: nothing of the container
	// (its files included) should exist before.
	Ready() error
	// Release ends the guard: the caller has deleted the container and
	// removed what GuardOpts named (or will, and takes the risk).
	Release()
}
