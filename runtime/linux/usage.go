//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/skillrun/skillrun/runtime"
)

// usageFiles are the container's cgroup files a foreground run's exit
// report reads (CPU time, the memory peak, an OOM kill, a refused fork),
// opened once its program runs and read at its end with a pread each.
// Opening a cgroup file walks kernfs: the seven opens the report made at
// the end cost about 0.4 ms between a warm sandbox's exit and its answer
// (hack/mcpbench's trace); now they are paid while the program runs.
type usageFiles struct {
	// cpu: cgroup v1's cpuacct.usage_user and cpuacct.usage_sys (ns),
	// or v2's cpu.stat (µs).
	cpu   []*os.File
	cpuV2 bool
	// peak is the memory cgroup's high-water mark (v1:
	// memory.max_usage_in_bytes, v2: memory.peak); sinceExec says it was
	// reset when the program started (v2: the reset holds for this
	// descriptor).
	peak      *os.File
	sinceExec bool
	// oom is v1's memory.oom_control or v2's memory.events, pids the pids
	// cgroup's pids.events.
	oom, pids *os.File
}

// openUsage opens s's usage files and resets the memory peak, so that it
// counts the program's own memory, not the runtime's init before its
// exec. A file that cannot be opened is left out of the report.
func openUsage(s *started) *usageFiles {
	u := &usageFiles{cpuV2: s.cpuV2}
	open := func(dir, name string) *os.File {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil
		}
		return f
	}
	if s.cpuDir != "" {
		names := []string{"cpuacct.usage_user", "cpuacct.usage_sys"}
		if s.cpuV2 {
			names = []string{"cpu.stat"}
		}
		for _, n := range names {
			f := open(s.cpuDir, n)
			if f == nil {
				u.closeFiles(u.cpu...)
				u.cpu = nil
				break
			}
			u.cpu = append(u.cpu, f)
		}
	}
	if s.memDir != "" {
		// v1 first (its reset is a write of 0), then v2 (a write of
		// "reset" to the descriptor that reads it later).
		for _, c := range []struct{ peak, reset, oom string }{
			{"memory.max_usage_in_bytes", "0", "memory.oom_control"},
			{"memory.peak", "reset\n", "memory.events"},
		} {
			f, err := os.OpenFile(filepath.Join(s.memDir, c.peak), os.O_RDWR, 0)
			if err != nil {
				if f = open(s.memDir, c.peak); f == nil {
					continue
				}
			} else if _, err := f.Write([]byte(c.reset)); err == nil {
				u.sinceExec = true
			}
			u.peak, u.oom = f, open(s.memDir, c.oom)
			break
		}
	}
	if s.pidsDir != "" {
		u.pids = open(s.pidsDir, "pids.events")
	}
	return u
}

// read is f's content from its start ("" on error).
func (u *usageFiles) read(f *os.File) string {
	if f == nil {
		return ""
	}
	var buf [1024]byte
	n, err := f.ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return ""
	}
	return string(buf[:n])
}

func num(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n, err == nil
}

// cpuTime is the cgroup's user and system CPU time.
func (u *usageFiles) cpuTime() (user, sys time.Duration, ok bool) {
	switch {
	case u == nil || len(u.cpu) == 0:
		return 0, 0, false
	case u.cpuV2:
		var gotU, gotS bool
		for _, l := range strings.Split(u.read(u.cpu[0]), "\n") {
			k, v, _ := strings.Cut(l, " ")
			n, ok := num(v)
			switch {
			case !ok:
			case k == "user_usec":
				user, gotU = time.Duration(n)*time.Microsecond, true
			case k == "system_usec":
				sys, gotS = time.Duration(n)*time.Microsecond, true
			}
		}
		return user, sys, gotU && gotS
	}
	us, okU := num(u.read(u.cpu[0]))
	sy, okS := num(u.read(u.cpu[1]))
	return time.Duration(us), time.Duration(sy), okU && okS
}

// fill adds to e what the memory and pids cgroups say: the memory peak
// (the program's own when it was reset at its start; else the larger of
// the cgroup's and rusage's), an OOM kill, a refused fork.
func (u *usageFiles) fill(e *runtime.ExitInfo) {
	if u == nil {
		return
	}
	if peak, ok := num(u.read(u.peak)); ok {
		if u.sinceExec {
			e.MaxRSS, e.PeakSinceExec = peak, true
		} else if peak > e.MaxRSS {
			e.MaxRSS = peak
		}
	}
	for _, line := range strings.Split(u.read(u.oom), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == "oom_kill" {
			if n, _ := num(v); n > 0 {
				e.OOMKilled = true
			}
		}
	}
	for _, line := range strings.Split(u.read(u.pids), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == "max" && strings.TrimSpace(v) != "0" {
			e.PidsLimitHit = true
		}
	}
}

// close closes the files (nil-safe).
func (u *usageFiles) close() {
	if u == nil {
		return
	}
	u.closeFiles(u.cpu...)
	u.closeFiles(u.peak, u.oom, u.pids)
}

func (u *usageFiles) closeFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}
