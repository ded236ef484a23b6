package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Process exit codes of `skillrun skill run`, one per outcome.
const (
	// ExitOK: the skill ran and exited 0.
	ExitOK = 0
	// ExitError: skillrun itself failed (runtime error, unreadable skill).
	ExitError = 1
	// ExitBadInput: bad usage, invalid skill, or input that does not
	// match the skill's schema; nothing ran.
	ExitBadInput = 2
	// ExitSkillFailed: the skill ran and exited non-zero or was killed by
	// a signal it did not get from skillrun.
	ExitSkillFailed = 3
	// ExitTimeout: the wall-clock limit was reached; the container was
	// killed.
	ExitTimeout = 4
	// ExitOOM: the skill ran out of memory (cgroup OOM kill, or, with
	// the rlimit fallback, an allocation failed and the skill died of it).
	ExitOOM = 5
	// ExitPolicy: the skill needs something the operator did not grant;
	// nothing ran.
	ExitPolicy = 6
	// ExitOutputLimit: the skill wrote more than the output cap; the
	// container was killed.
	ExitOutputLimit = 7
)

// Stopped reasons reported in Result.StoppedReason.
const (
	StoppedTimeout     = "timeout"
	StoppedMemory      = "memory"
	StoppedPids        = "pids"
	StoppedOutputLimit = "output_limit"
	StoppedPolicy      = "policy"
	StoppedSignal      = "signal"
	// StoppedCPUTime: the RLIMIT_CPU backstop (rootless without cgroups)
	// killed the skill; its process exit code is ExitTimeout.
	StoppedCPUTime = "cpu_time"
)

// Result is the outcome of one skill run, printed as JSON by
// `skillrun skill run`.
type Result struct {
	// OK is true when the skill ran and exited 0.
	OK bool `json:"ok"`
	// Skill is the skill's name.
	Skill string `json:"skill"`
	// ExitCode is the skill's exit status (128+N when killed by signal N),
	// -1 when it did not run.
	ExitCode int `json:"exit_code"`
	// Output is stdout parsed as JSON when it is JSON, else the raw text,
	// cut so that its JSON string form fits the output limit.
	Output any `json:"output"`
	// OutputDropped is how many bytes at the end of a stdout that is not
	// JSON were left out of Output: escaped (a control byte is 6 bytes
	// of JSON), the whole would have been larger than the output limit.
	OutputDropped int64 `json:"output_dropped,omitempty"`
	// Stderr is the tail of the skill's stderr.
	Stderr string `json:"stderr"`
	// StoppedReason says why skillrun stopped or refused the skill:
	// timeout, memory, pids, output_limit, policy, signal, cpu_time or "".
	StoppedReason string `json:"stopped_reason"`
	// Error explains a refusal or a stop in words.
	Error string `json:"error,omitempty"`
	// Usage is what the run consumed.
	Usage Usage `json:"usage"`
	// Limits are the limits that were really applied (absent when the
	// skill did not run).
	Limits *Limits `json:"limits,omitempty"`
	// Network is what a skill under a network allowlist reached and was
	// refused (absent otherwise).
	Network *Network `json:"network,omitempty"`
	// Environment is the dependency environment the skill ran with
	// (absent when it declares no dependencies).
	Environment *EnvInfo `json:"environment,omitempty"`
	// Warnings are grants beyond the manifest and limits not enforced.
	Warnings []string `json:"warnings,omitempty"`
	// Command is the command line an exec'd command ran with (skill exec,
	// sandbox), after relative script paths were resolved; absent for an
	// entry point.
	Command []string `json:"command,omitempty"`
	// Cwd is the exec'd command's working directory.
	Cwd string `json:"cwd,omitempty"`
	// Notes say what skillrun did for the command (a script path found in
	// the skill's folder rather than the working directory).
	Notes []string `json:"notes,omitempty"`
	// MissingModule names the Python or Node module the run failed to
	// import; Error then says how to add it.
	MissingModule string `json:"missing_module,omitempty"`
}

// EnvInfo describes a skill's dependency environment in a result.
type EnvInfo struct {
	// Key is the environment's content-addressed key (sha256, hex).
	Key string `json:"key"`
	// Built is true when this run built it first (a cache miss).
	Built bool `json:"built"`
	// BuildMS is how long that build took.
	BuildMS int64 `json:"build_ms,omitempty"`
	// Python and Node list the installed packages as name==version /
	// name@version.
	Python []string `json:"python,omitempty"`
	Node   []string `json:"node,omitempty"`
	// Build is the build's own result (its network report, usage) when
	// this run built the environment.
	Build *Result `json:"build,omitempty"`
}

// Usage is the resources a run consumed.
type Usage struct {
	WallMS          int64 `json:"wall_ms"`
	CPUMS           int64 `json:"cpu_ms"`
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
}

// Limits are the limits applied to a run. MemoryBytes, CPUs and Pids are
// null when nothing enforced them; NotEnforced names those. Rootless
// without delegated cgroups, rlimits stand in (spec.Fallback): memory per
// process, tasks per sandbox (Linux 5.14+), no CPU quota; Enforcement says
// which mechanism enforced each limit.
type Limits struct {
	// Cgroups is true when the container had its own cgroups.
	Cgroups bool `json:"cgroups"`
	// MemoryBytes is the memory (and memory+swap) limit.
	MemoryBytes *int64 `json:"memory_bytes"`
	// CPUs is the CPU quota in cores.
	CPUs *float64 `json:"cpus"`
	// Pids is the task limit.
	Pids *int64 `json:"pids"`
	// TimeoutMS is the wall-clock limit (always enforced).
	TimeoutMS int64 `json:"timeout_ms"`
	// OutputBytes caps stdout and stderr each (always enforced).
	OutputBytes int64 `json:"output_bytes"`
	// ScratchBytes is the size of the /tmp tmpfs (always enforced).
	ScratchBytes int64 `json:"scratch_bytes"`
	// FileSizeBytes is RLIMIT_FSIZE.
	FileSizeBytes int64 `json:"file_size_bytes"`
	// OpenFiles is RLIMIT_NOFILE.
	OpenFiles uint64 `json:"open_files"`
	// Network is "none" (loopback only), "allowlist" (the granted hosts
	// only, see Result.Network) or "host" (full host network).
	Network string `json:"network"`
	// Workspace is true when a host folder was bound writable.
	Workspace bool `json:"workspace"`
	// NotEnforced lists the requested limits the host did not apply.
	NotEnforced []string `json:"not_enforced,omitempty"`
	// Enforcement says, per limit, what enforced it.
	Enforcement *Enforcement `json:"enforcement,omitempty"`
}

// Enforcement is, per limit, its value and the mechanism that enforced it.
type Enforcement struct {
	// Memory is in bytes.
	Memory Enforced `json:"memory"`
	// Pids counts tasks (processes and threads).
	Pids Enforced `json:"pids"`
	// CPUs is the CPU quota in cores.
	CPUs Enforced `json:"cpus"`
	// CPUTime is the RLIMIT_CPU backstop in CPU seconds, set only when
	// rlimits stand in for cgroups.
	CPUTime *Enforced `json:"cpu_time,omitempty"`
}

// Scopes of an enforced limit.
const (
	// ScopeSandbox: the limit bounds the whole sandbox.
	ScopeSandbox = "sandbox"
	// ScopeProcess: the limit bounds each process of the sandbox.
	ScopeProcess = "process"
)

// Enforced is one limit and how it was enforced.
type Enforced struct {
	// Limit is the value (unit per field of Enforcement).
	Limit float64 `json:"limit"`
	// EnforcedBy is "cgroup", "rlimit_as", "rlimit_data", "rlimit_nproc",
	// "rlimit_cpu" or "none".
	EnforcedBy string `json:"enforced_by"`
	// Scope is "sandbox" or "process" ("" when not enforced).
	Scope string `json:"scope,omitempty"`
}

// ProcessExitCode maps a result to the documented process exit code.
func (r *Result) ProcessExitCode() int {
	switch r.StoppedReason {
	case StoppedTimeout, StoppedCPUTime:
		return ExitTimeout
	case StoppedMemory:
		return ExitOOM
	case StoppedPolicy:
		return ExitPolicy
	case StoppedOutputLimit:
		return ExitOutputLimit
	}
	if r.OK {
		return ExitOK
	}
	return ExitSkillFailed
}

// InputError is a bad input: not JSON, not an object, or not matching the
// skill's schema. Nothing ran.
type InputError struct{ Err error }

// Error implements error.
func (e *InputError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *InputError) Unwrap() error { return e.Err }

// SkillError is an error of the runner about one skill: it reads
// `skill "NAME": ERR`, the skill named first, so a caller that names the
// skill itself does not name it twice.
type SkillError struct {
	Skill string
	Err   error
}

// Error implements error.
func (e *SkillError) Error() string { return fmt.Sprintf("skill %q: %v", e.Skill, e.Err) }

// Unwrap returns the cause.
func (e *SkillError) Unwrap() error { return e.Err }

// IsInputError reports whether err is (or wraps) an *InputError.
func IsInputError(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}

// parseOutput returns stdout as JSON when it is a JSON document whose
// JSON form in the result fits limit bytes, else as a string cut so that
// its JSON form, the quotes aside, is at most limit bytes, and how many
// bytes of b the cut left out.
func parseOutput(b []byte, limit int64) (out any, dropped int64) {
	trimmed := trimSpace(b)
	if len(trimmed) > 0 && json.Valid(trimmed) && rawFits(trimmed, limit) {
		return json.RawMessage(trimmed), 0
	}
	n := jsonStringPrefix(b, limit)
	return string(b[:n]), int64(len(b) - n)
}

// rawFits reports whether the JSON document b, as the result's encoder
// writes it (compacted, U+2028 and U+2029 escaped: 6 bytes for 3), is at
// most limit bytes. Only those escapes make it larger than b.
func rawFits(b []byte, limit int64) bool {
	if int64(len(b)) <= limit && !bytes.Contains(b, []byte("\u2028")) && !bytes.Contains(b, []byte("\u2029")) {
		return true
	}
	var c bytes.Buffer
	if json.Compact(&c, b) != nil {
		return false
	}
	n := int64(c.Len()) + 3*int64(bytes.Count(c.Bytes(), []byte("\u2028"))+bytes.Count(c.Bytes(), []byte("\u2029")))
	return n <= limit
}

// jsonStringPrefix is the length of the longest prefix of b, ending at a
// character (or before an invalid byte), whose JSON string form is at
// most max bytes without the quotes. Each character is counted at the
// most an encoder writes for it (with HTML escaping off, as `skill run`
// prints): \uXXXX (6 bytes) for control bytes, DEL, U+2028, U+2029 and
// each invalid byte (U+FFFD), two bytes for the quote, the backslash,
// newline, carriage return and tab.
func jsonStringPrefix(b []byte, max int64) int {
	var size int64
	for i := 0; i < len(b); {
		c, w, n := b[i], 1, int64(1)
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			n = 2
		case c < 0x20 || c == 0x7f:
			n = 6
		case c >= utf8.RuneSelf:
			var r rune
			r, w = utf8.DecodeRune(b[i:])
			n = int64(w)
			if r == utf8.RuneError && w == 1 || r == '\u2028' || r == '\u2029' {
				n = 6
			}
		}
		if size+n > max {
			return i
		}
		size += n
		i += w
	}
	return len(b)
}

func trimSpace(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isSpace(b[i]) {
		i++
	}
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }
