//go:build linux

package linux

// What a foreground run reports of its container's end: the exit status,
// and the usage read from the wait's rusage or, from a status the program's
// side reported, from the container's cgroups.

import (
	"os"
	"syscall"
	"time"

	"github.com/skillrun/skillrun/runtime"
)

// exitStatus is runc's: the exit code, or 128+N for signal N.
func exitStatus(ps *os.ProcessState) int {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		return ps.ExitCode()
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// fillReported fills e from a status the program's side reported, before
// the container's first process is reaped: CPU time from the CPU
// accounting cgroup (the same processes rusage would count), memory and
// limits from the cgroups as fillExit reads them. It returns false when
// the CPU time cannot be read (the caller then waits).
func fillReported(e *runtime.ExitInfo, s *started, status int, wall time.Duration) bool {
	cpu, user, sys, ok := s.usage.cpuTime()
	if !ok {
		return false
	}
	*e = runtime.ExitInfo{Status: status, Wall: wall, Cgroups: s.cgroups, CPU: cpu, UserCPU: user, SysCPU: sys}
	s.usage.fill(e)
	return true
}

// fillExit records what the foreground run observed.
func fillExit(e *runtime.ExitInfo, s *started, ps *os.ProcessState, status int, wall time.Duration) {
	e.Status = status
	e.Wall = wall
	e.Cgroups = s.cgroups
	if ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = ws.Signal()
		}
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			e.UserCPU = time.Duration(ru.Utime.Nano())
			e.SysCPU = time.Duration(ru.Stime.Nano())
			e.CPU = e.UserCPU + e.SysCPU
			e.MaxRSS = ru.Maxrss * 1024
		}
	}
	s.usage.fill(e)
}
