//go:build linux

package linux

// What a foreground run reports of its container's end: the exit status,
// and the usage read from the wait's rusage or, from a status the program's
// side reported, from the container's cgroups.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// fillCgroupExit adds to e what the container's memory and pids cgroups
// say: the memory peak (since the program's exec when it was reset), an
// OOM kill, a refused fork.
func fillCgroupExit(e *runtime.ExitInfo, s *started) {
	if s.memDir != "" {
		peak, oom := memoryEvents(s.memDir)
		if s.peak != nil {
			// The program's own peak (the cgroup's since its exec): the
			// rusage figure includes the runtime's init before the exec.
			if p, ok := s.peak(); ok {
				e.MaxRSS, e.PeakSinceExec = p, true
				peak = 0
			}
		}
		if peak > e.MaxRSS {
			e.MaxRSS = peak
		}
		e.OOMKilled = oom
	}
	if s.pidsDir != "" {
		e.PidsLimitHit = pidsLimitHit(s.pidsDir)
	}
}

// fillReported fills e from a status the program's side reported, before
// the container's first process is reaped: CPU time from the CPU
// accounting cgroup (the same processes rusage would count), memory and
// limits from the cgroups as fillExit reads them. It returns false when
// the CPU time cannot be read (the caller then waits).
func fillReported(e *runtime.ExitInfo, s *started, status int, wall time.Duration) bool {
	user, sys, ok := cgroupCPU(s.cpuDir, s.cpuV2)
	if !ok {
		return false
	}
	*e = runtime.ExitInfo{Status: status, Wall: wall, Cgroups: s.cgroups, UserCPU: user, SysCPU: sys}
	fillCgroupExit(e, s)
	return true
}

// cgroupCPU reads the user and system CPU time of a cgroup: v1's
// cpuacct.usage_user and cpuacct.usage_sys (ns), v2's cpu.stat (µs).
func cgroupCPU(dir string, v2 bool) (user, sys time.Duration, ok bool) {
	if v2 {
		b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
		if err != nil {
			return 0, 0, false
		}
		var gotU, gotS bool
		for _, l := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(l, " ")
			n, err := strconv.ParseInt(v, 10, 64)
			switch {
			case err != nil:
			case k == "user_usec":
				user, gotU = time.Duration(n)*time.Microsecond, true
			case k == "system_usec":
				sys, gotS = time.Duration(n)*time.Microsecond, true
			}
		}
		return user, sys, gotU && gotS
	}
	read := func(name string) (time.Duration, bool) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return time.Duration(n), err == nil
	}
	user, okU := read("cpuacct.usage_user")
	sys, okS := read("cpuacct.usage_sys")
	return user, sys, okU && okS
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
			e.MaxRSS = ru.Maxrss * 1024
		}
	}
	fillCgroupExit(e, s)
}
