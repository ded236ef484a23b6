//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/runtime"
)

// The cgroup files a foreground run's exit report reads.
const (
	fileCPUUsage = iota // v1 cpuacct.usage (ns; exact, unlike its user/sys split)
	fileCPUStat         // v2 cpu.stat (µs)
	filePeak            // v1 memory.max_usage_in_bytes, v2 memory.peak
	fileOOM             // v1 memory.oom_control, v2 memory.events
	filePids            // pids.events
	nUsageFiles
)

// usageFiles are the container's cgroup files a foreground run's exit
// report reads (CPU time, the memory peak, an OOM kill, a refused fork).
// When the run answers from its program's reported status (the skill
// runner's warm sandboxes), they are opened as the program starts and
// read with a pread each at its end: opening a cgroup file walks kernfs,
// and the seven opens of the report cost 0.38 ms between a warm
// sandbox's exit and its answer (0.07 ms read by descriptor; a trace of
// hack/mcpbench's calls). Otherwise they are read by path at the end, as
// a cold run has no answer to hurry, and its start no CPU to spare.
type usageFiles struct {
	paths [nUsageFiles]string // "" when the cgroup has no such file
	fds   [nUsageFiles]int    // -1 when not open
	// sinceExec says the peak was reset when the program started, so
	// that it counts the program's own memory, not the runtime's init
	// before its exec (v2: the reset holds for its descriptor, kept).
	sinceExec bool
}

// openUsage finds s's usage files and resets the memory peak; with ahead
// it opens them all now.
func openUsage(s *started, ahead bool) *usageFiles {
	u := &usageFiles{}
	for i := range u.fds {
		u.fds[i] = -1
	}
	if s.cpuDir != "" {
		if s.cpuV2 {
			u.paths[fileCPUStat] = filepath.Join(s.cpuDir, "cpu.stat")
		} else {
			u.paths[fileCPUUsage] = filepath.Join(s.cpuDir, "cpuacct.usage")
		}
	}
	if s.memDir != "" {
		// v1 first (its reset is a write of 0), then v2 (a write of
		// "reset" to the descriptor that reads it later).
		for _, c := range []struct {
			peak, reset, oom string
			perFD            bool // the reset holds for its descriptor only
		}{
			{"memory.max_usage_in_bytes", "0", "memory.oom_control", false},
			{"memory.peak", "reset\n", "memory.events", true},
		} {
			p := filepath.Join(s.memDir, c.peak)
			fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
			if err != nil {
				if _, err := os.Stat(p); err != nil {
					continue
				}
			} else if _, err := unix.Write(fd, []byte(c.reset)); err == nil {
				u.sinceExec = true
			}
			u.paths[filePeak], u.paths[fileOOM] = p, filepath.Join(s.memDir, c.oom)
			if fd >= 0 && (ahead || c.perFD) {
				u.fds[filePeak] = fd
			} else if fd >= 0 {
				unix.Close(fd)
			}
			break
		}
	}
	if s.pidsDir != "" {
		u.paths[filePids] = filepath.Join(s.pidsDir, "pids.events")
	}
	if ahead {
		for i, p := range u.paths {
			if p != "" && u.fds[i] < 0 {
				if fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
					u.fds[i] = fd
				}
			}
		}
	}
	return u
}

// read is file i's content from its start ("" when absent or on error).
func (u *usageFiles) read(i int) string {
	var buf [1024]byte
	if fd := u.fds[i]; fd >= 0 {
		n, err := unix.Pread(fd, buf[:], 0)
		if err != nil || n <= 0 {
			return ""
		}
		return string(buf[:n])
	}
	if u.paths[i] == "" {
		return ""
	}
	b, err := os.ReadFile(u.paths[i])
	if err != nil {
		return ""
	}
	return string(b)
}

func num(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n, err == nil
}

// cpuTime is the cgroup's CPU time and, from v2, its user and system
// split (v1 counts the split in scheduler ticks: it is left out, and its
// total, exact, is one read).
func (u *usageFiles) cpuTime() (total, user, sys time.Duration, ok bool) {
	switch {
	case u == nil:
		return 0, 0, 0, false
	case u.paths[fileCPUStat] != "":
		for _, l := range strings.Split(u.read(fileCPUStat), "\n") {
			k, v, _ := strings.Cut(l, " ")
			n, isNum := num(v)
			switch {
			case !isNum:
			case k == "usage_usec":
				total, ok = time.Duration(n)*time.Microsecond, true
			case k == "user_usec":
				user = time.Duration(n) * time.Microsecond
			case k == "system_usec":
				sys = time.Duration(n) * time.Microsecond
			}
		}
		return total, user, sys, ok
	}
	n, ok := num(u.read(fileCPUUsage))
	return time.Duration(n), 0, 0, ok
}

// fill adds to e what the memory and pids cgroups say: the memory peak
// (the program's own when it was reset at its start; else the larger of
// the cgroup's and rusage's), an OOM kill, a refused fork.
func (u *usageFiles) fill(e *runtime.ExitInfo) {
	if u == nil {
		return
	}
	if peak, ok := num(u.read(filePeak)); ok {
		if u.sinceExec {
			e.MaxRSS, e.PeakSinceExec = peak, true
		} else if peak > e.MaxRSS {
			e.MaxRSS = peak
		}
	}
	for _, line := range strings.Split(u.read(fileOOM), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == "oom_kill" {
			if n, _ := num(v); n > 0 {
				e.OOMKilled = true
			}
		}
	}
	for _, line := range strings.Split(u.read(filePids), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == "max" && strings.TrimSpace(v) != "0" {
			e.PidsLimitHit = true
		}
	}
}

// close closes what is open (nil-safe).
func (u *usageFiles) close() {
	if u == nil {
		return
	}
	for i, fd := range u.fds {
		if fd >= 0 {
			unix.Close(fd)
			u.fds[i] = -1
		}
	}
}
