package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/spec"
)

// refusal is the Result of a run the policy refused: nothing ran.
func refusal(sk *spec.Skill, env *EnvInfo, warnings []string, reason string) *Result {
	return &Result{Skill: sk.Name, ExitCode: -1, Environment: env, Warnings: warnings,
		StoppedReason: StoppedPolicy, Error: reason}
}

// outcome classifies the ended run, from the runtime's status and error,
// into the Result: the one place that says why a run stopped. ctx is the
// call's (its end is an interruption, not a failure of skillrun).
func (c *container) outcome(ctx context.Context, wall time.Duration, status int, runErr error) (*Result, error) {
	res := c.base
	res.Warnings = append([]string(nil), c.base.Warnings...)
	res.Network = c.network
	policy, info := c.plan.policy, &c.info
	cause := context.Cause(c.runCtx)
	interrupted := false
	if runErr != nil {
		switch {
		case errors.Is(cause, errTimeout), errors.Is(cause, errOutputLimit):
			// We stopped it; reported below.
		case ctx.Err() != nil:
			interrupted = true
		default:
			return nil, fmt.Errorf("run skill %q: %w", c.plan.sk.Name, runErr)
		}
	}
	if err := c.waitConfig(); err != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("bundle config.json not written: %v", err))
	}
	if info.Status == 0 && status != 0 {
		info.Status = status
	}
	if c.warm && info.Signal == 0 && info.Status > 128 && info.Status < 128+65 {
		// The holder reports a signal death of the entry point as
		// 128+N, as a shell does.
		info.Signal = unix.Signal(info.Status - 128)
	}
	if c.warm {
		info.Wall = wall
	}
	res.ExitCode = info.Status
	res.Output, res.OutputDropped = parseOutput(c.stdout.Bytes(), policy.Output)
	res.Stderr = tail(c.stderr.Bytes())
	fillUsage(&res, info, wall)
	fillLimits(&res, policy, info)
	switch {
	case interrupted:
		res.StoppedReason = StoppedSignal
		res.Error = "interrupted: " + context.Cause(ctx).Error()
	case errors.Is(cause, errTimeout):
		res.StoppedReason = StoppedTimeout
		res.Error = fmt.Sprintf("killed after the %s wall-clock limit", policy.Timeout)
	case errors.Is(cause, errOutputLimit):
		res.StoppedReason = StoppedOutputLimit
		res.Error = fmt.Sprintf("killed: wrote more than the %d-byte output limit", policy.Output)
	case info.OOMKilled:
		res.StoppedReason = StoppedMemory
		res.Error = fmt.Sprintf("killed: out of memory (limit %d bytes)", policy.Memory)
	case info.Status != 0 && enforcedBy(&res, "memory") != "" && enforcedBy(&res, "memory") != spec.EnforcedByCgroup && looksLikeMemoryLimit(c.stderr.Bytes()):
		res.StoppedReason = StoppedMemory
		res.Error = fmt.Sprintf("failed to allocate memory: the %d-byte per-process limit (%s) was reached", policy.Memory, enforcedBy(&res, "memory"))
	case info.Status != 0 && enforcedBy(&res, "pids") != "" && looksLikePidsLimit(c.stderr.Bytes()):
		res.StoppedReason = StoppedPids
		res.Error = fmt.Sprintf("failed to create a process or thread: task limit %d reached", policy.Pids)
		if by := enforcedBy(&res, "memory"); by != "" && by != spec.EnforcedByCgroup {
			// EAGAIN from pthread_create is also a thread stack that did
			// not fit under the per-process address-space limit.
			res.Error = fmt.Sprintf("failed to create a process or thread: task limit %d or the %d-byte per-process memory limit (%s; each thread reserves a stack) reached", policy.Pids, policy.Memory, by)
		}
	case cpuTimeStop(policy, info):
		res.StoppedReason = StoppedCPUTime
		res.Error = fmt.Sprintf("killed: a process used the %d s CPU-time backstop (RLIMIT_CPU)", policy.Fallback.CPUTimeSeconds)
	case info.Signal == unix.SIGKILL && wall >= policy.Timeout:
		// The lifetime guard's backstop, when this process' own timer
		// was late (a stopped or starved runner).
		res.StoppedReason = StoppedTimeout
		res.Error = fmt.Sprintf("killed after the %s wall-clock limit", policy.Timeout)
	case info.Signal != 0:
		res.StoppedReason = StoppedSignal
		res.Error = fmt.Sprintf("killed by signal %d (%s)", int(info.Signal), info.Signal)
	}
	if info.PidsLimitHit {
		// The pids cgroup refused a fork or a thread: a skill that went
		// on regardless is told, one that failed of it is stopped by it.
		if res.StoppedReason == "" && res.ExitCode != 0 {
			res.StoppedReason = StoppedPids
			res.Error = fmt.Sprintf("failed to create a process or thread: task limit %d reached", policy.Pids)
		} else if res.StoppedReason != StoppedPids {
			res.Warnings = append(res.Warnings, fmt.Sprintf("the task limit (%d) was reached: some process or thread creation failed", policy.Pids))
		}
	}
	res.OK = res.StoppedReason == "" && res.ExitCode == 0
	if !res.OK && res.StoppedReason == "" {
		stderr := c.stderr.Bytes()
		if c.plan.exec != nil && (res.ExitCode == 127 || res.ExitCode == 126) {
			if m := notFoundRE().FindSubmatch(stderr); m != nil {
				what := "command not found"
				if string(m[2]) == "Permission denied" {
					what = "command not executable"
				}
				res.Error = fmt.Sprintf("%s: %s", what, m[1])
			}
		}
		if mod, hint := missingModule(stderr); mod != "" && res.Error == "" {
			res.MissingModule, res.Error = mod, hint
		}
	}
	return &res, nil
}

// looksLikeMemoryLimit recognises the errors interpreters and libc print
// when an allocation fails (ENOMEM from mmap or brk under RLIMIT_AS or
// RLIMIT_DATA).
func looksLikeMemoryLimit(stderr []byte) bool {
	s := string(stderr)
	for _, m := range []string{"MemoryError", "Cannot allocate memory", "cannot allocate memory", "out of memory", "Out of memory", "bad_alloc", "xmalloc"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// cpuTimeStop reports whether the init was killed by the RLIMIT_CPU
// backstop: SIGXCPU at the soft limit, or SIGKILL at the hard one with the
// CPU time to show for it.
func cpuTimeStop(p *spec.Policy, info *runtime.ExitInfo) bool {
	if p.Fallback == nil || info.Cgroups {
		return false
	}
	switch info.Signal {
	case syscall.SIGXCPU:
		return true
	case syscall.SIGKILL:
		return info.CPU >= time.Duration(p.Fallback.CPUTimeSeconds)*time.Second
	}
	return false
}

// enforcedBy is the mechanism the result reports for limit ("memory",
// "pids"), "" when none.
func enforcedBy(res *Result, limit string) string {
	if res.Limits == nil || res.Limits.Enforcement == nil {
		return ""
	}
	var e *Enforced
	switch limit {
	case "memory":
		e = &res.Limits.Enforcement.Memory
	case "pids":
		e = &res.Limits.Enforcement.Pids
	default:
		return ""
	}
	if e.EnforcedBy == spec.EnforcedByNone {
		return ""
	}
	return e.EnforcedBy
}

// looksLikePidsLimit recognises the errors interpreters print when fork or
// thread creation fails with EAGAIN, the pids controller's error.
func looksLikePidsLimit(stderr []byte) bool {
	s := string(stderr)
	for _, m := range []string{"Resource temporarily unavailable", "can't start new thread", "fork: retry", "EAGAIN"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

func fillUsage(res *Result, info *runtime.ExitInfo, wall time.Duration) {
	w := info.Wall
	if w == 0 {
		w = wall
	}
	res.Usage = Usage{
		WallMS:          w.Milliseconds(),
		CPUMS:           info.CPU.Milliseconds(),
		PeakMemoryBytes: info.MaxRSS,
	}
}

func fillLimits(res *Result, p *spec.Policy, info *runtime.ExitInfo) {
	l := Limits{
		Cgroups:       info.Cgroups,
		TimeoutMS:     p.Timeout.Milliseconds(),
		OutputBytes:   p.Output,
		ScratchBytes:  p.Scratch,
		FileSizeBytes: p.Scratch,
		OpenFiles:     p.NoFile,
		Network:       p.Network,
		Workspace:     p.Workspace != "",
	}
	mem, cpus, pids := p.Memory, p.CPUs, p.Pids
	en := &Enforcement{
		Memory: Enforced{Limit: float64(mem), EnforcedBy: spec.EnforcedByNone},
		Pids:   Enforced{Limit: float64(pids), EnforcedBy: spec.EnforcedByNone},
		CPUs:   Enforced{Limit: cpus, EnforcedBy: spec.EnforcedByNone},
	}
	l.Enforcement = en
	switch f := p.Fallback; {
	case info.Cgroups:
		l.MemoryBytes, l.CPUs, l.Pids = &mem, &cpus, &pids
		for _, e := range []*Enforced{&en.Memory, &en.Pids, &en.CPUs} {
			e.EnforcedBy, e.Scope = spec.EnforcedByCgroup, ScopeSandbox
		}
	case f != nil:
		l.MemoryBytes = &mem
		en.Memory.EnforcedBy, en.Memory.Scope = f.Memory, ScopeProcess
		if f.Pids == spec.EnforcedByRlimitNproc {
			l.Pids = &pids
			en.Pids.EnforcedBy, en.Pids.Scope = f.Pids, ScopeSandbox
		} else {
			l.NotEnforced = append(l.NotEnforced, "pids")
		}
		l.NotEnforced = append(l.NotEnforced, "cpus")
		en.CPUTime = &Enforced{Limit: float64(f.CPUTimeSeconds), EnforcedBy: f.CPUTime, Scope: ScopeProcess}
		res.Warnings = append(res.Warnings, fmt.Sprintf(
			"no cgroups available to the runtime: memory bounded per process (%s), tasks by %s, cpu quota not enforced (%s backstop: %d s of CPU per process)",
			f.Memory, f.Pids, f.CPUTime, f.CPUTimeSeconds))
	default:
		l.NotEnforced = []string{"memory", "cpus", "pids"}
		res.Warnings = append(res.Warnings, "memory, cpu and pids limits were not enforced: no cgroups available to the runtime")
	}
	res.Limits = &l
}
