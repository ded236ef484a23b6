//go:build linux

// CPU time per call: the server's and its reaped children's, mcpbench's
// own children's, and the whole machine's busy time as a cross-check.

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuUse is the CPU time per call of a rate's calls.
type cpuUse struct {
	calls   int
	own     time.Duration // the processes measured (see the table's notes)
	machine time.Duration // the whole machine's busy time
	warm    int           // calls that found a warm sandbox (-1: not known)
}

var clkTck = func() float64 {
	out, _ := exec.Command("getconf", "CLK_TCK").Output()
	if v, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && v > 0 {
		return float64(v)
	}
	return 100
}()

func ticks(t uint64) time.Duration {
	return time.Duration(float64(t) / clkTck * float64(time.Second))
}

// procCPU is pid's utime+stime+cutime+cstime (/proc/PID/stat): its own
// CPU and its reaped children's (and theirs, as each reaped its own).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(b, ')')
	if err != nil || i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3, state
	if len(f) < 15 {
		return 0
	}
	var sum uint64
	for _, s := range f[11:15] { // fields 14-17
		v, _ := strconv.ParseUint(s, 10, 64)
		sum += v
	}
	return ticks(sum)
}

// childrenCPU is the CPU time of mcpbench's reaped children (GNU time's
// user+sys of the commands it runs).
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineBusy is the busy time of all CPUs (/proc/stat: user, nice,
// system, irq, softirq, steal).
func machineBusy() time.Duration {
	b, _ := os.ReadFile("/proc/stat")
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var sum uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseUint(f[i], 10, 64)
		sum += v
	}
	return ticks(sum)
}

// rateCPU is rate with the CPU time per call: cpu() read before and
// after, each time once settle (if any) has returned, so that a
// sandbox's launch, run and removal are counted once per call.
func rateCPU(total int, f func() error, cpu func() time.Duration, settle func() error, log *callLog) (float64, cpuUse, error) {
	u := cpuUse{calls: total, warm: -1}
	if settle != nil {
		if err := settle(); err != nil {
			return 0, u, err
		}
	}
	c0, m0 := cpu(), machineBusy()
	var w0, k0 int
	if log != nil {
		w0, k0 = log.counts()
	}
	r, err := rate(total, f)
	if err != nil {
		return 0, u, err
	}
	if settle != nil {
		if err := settle(); err != nil {
			return 0, u, err
		}
	}
	u.own, u.machine = (cpu()-c0)/time.Duration(total), (machineBusy()-m0)/time.Duration(total)
	if log != nil {
		// The server logs a call as it answers it: wait for the last lines.
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			w, k := log.counts()
			if w-w0+k-k0 >= total {
				break
			}
		}
		w, _ := log.counts()
		u.warm = w - w0
	}
	return r, u, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// busyNS is the whole machine's CPU time in nanoseconds, every task's
// (kernel threads too): the root cpuacct cgroup's usage (v1), else the
// root cgroup's usage_usec (v2), else /proc/stat's clock ticks.
func busyNS() time.Duration {
	if b, err := os.ReadFile("/sys/fs/cgroup/cpuacct/cpuacct.usage"); err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return time.Duration(v)
		}
	}
	for _, p := range []string{"/sys/fs/cgroup/cpu.stat", "/sys/fs/cgroup/unified/cpu.stat"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
				if us, err := strconv.ParseInt(v, 10, 64); err == nil {
					return time.Duration(us) * time.Microsecond
				}
			}
		}
	}
	return machineBusy()
}

// settle waits until the machine is idle: under 1.5 ms of CPU time in
// all over the last 25 ms (3% of two cores), so that a timed call does
// not share the CPUs with what the previous one left (a used sandbox's
// teardown: kernel workers free its namespaces and cgroups after it is
// gone), as an agent's calls, spaced by its model's turns, do not. At
// most 2 s; it reports whether the machine got idle.
func settle() bool {
	const window, poll = 25 * time.Millisecond, 5 * time.Millisecond
	var hist []time.Duration
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(poll) {
		hist = append(hist, busyNS())
		if n := int(window / poll); len(hist) > n {
			if hist[len(hist)-1]-hist[len(hist)-1-n] < 1500*time.Microsecond {
				return true
			}
		}
	}
	return false
}
