//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skillrun/skillrun/runtime"
)

// writeFiles writes name -> content under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUsageFilesV1: the report is read from the descriptors opened at the
// program's start, whatever the files say by then (the kernel rewrites
// them in place; here the test does); the peak was reset (a write of 0).
func TestUsageFilesV1(t *testing.T) {
	cpu, mem, pids := t.TempDir(), t.TempDir(), t.TempDir()
	writeFiles(t, cpu, map[string]string{"cpuacct.usage": "1\n"})
	writeFiles(t, mem, map[string]string{"memory.max_usage_in_bytes": "99999999\n", "memory.oom_control": "oom_kill 0\n"})
	writeFiles(t, pids, map[string]string{"pids.events": "max 0\n"})
	u := openUsage(&started{cpuDir: cpu, memDir: mem, pidsDir: pids}, true)
	defer u.close()
	if b, _ := os.ReadFile(filepath.Join(mem, "memory.max_usage_in_bytes")); string(b[:1]) != "0" {
		t.Errorf("the peak was not reset at the start: %q", b)
	}
	if !u.sinceExec {
		t.Error("a writable max_usage_in_bytes: the peak should count from the program's start")
	}
	// The folders move away (the report must not walk the paths again),
	// and the program ran: the kernel's numbers.
	for _, d := range []*string{&cpu, &mem, &pids} {
		if err := os.Rename(*d, *d+"-moved"); err != nil {
			t.Fatal(err)
		}
		*d += "-moved"
	}
	writeFiles(t, cpu, map[string]string{"cpuacct.usage": "1750000\n"})
	writeFiles(t, mem, map[string]string{"memory.max_usage_in_bytes": "4194304\n",
		"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"})
	writeFiles(t, pids, map[string]string{"pids.events": "max 3\n"})
	total, user, sys, ok := u.cpuTime()
	if !ok || total != 1750*time.Microsecond || user != 0 || sys != 0 {
		t.Errorf("cpuTime = %v, %v, %v, %v; want 1.75ms, no split (v1 counts it in ticks), true", total, user, sys, ok)
	}
	e := runtime.ExitInfo{MaxRSS: 64 << 20} // rusage's, the runtime's init included
	u.fill(&e)
	if e.MaxRSS != 4194304 || !e.PeakSinceExec || !e.OOMKilled || !e.PidsLimitHit {
		t.Errorf("fill: %+v; want the reset peak 4194304 since exec, an OOM kill, the pids limit hit", e)
	}
	// Read again (the early report, then the wait's): the same.
	e2 := runtime.ExitInfo{}
	u.fill(&e2)
	if e2.MaxRSS != 4194304 || !e2.OOMKilled || !e2.PidsLimitHit {
		t.Errorf("second fill: %+v", e2)
	}
}

// TestUsageFilesV2: one folder; cpu.stat in µs; memory.events; not
// opened ahead (a cold run), they are read by path at the end, but for
// memory.peak, whose reset holds for the descriptor that made it.
func TestUsageFilesV2(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"cpu.stat": "x", "memory.peak": "1\n", "memory.events": "x", "pids.events": "x"})
	u := openUsage(&started{cpuDir: dir, cpuV2: true, memDir: dir, pidsDir: dir}, false)
	defer u.close()
	// memory.max_usage_in_bytes does not exist: memory.peak, reset.
	if !u.sinceExec || u.fds[filePeak] < 0 {
		t.Error("a writable memory.peak: the peak should count from the program's start, through the descriptor that reset it")
	}
	for _, i := range []int{fileCPUStat, fileOOM, filePids} {
		if u.fds[i] >= 0 {
			t.Errorf("file %d opened ahead for a run that reads at its end", i)
		}
	}
	writeFiles(t, dir, map[string]string{
		"cpu.stat":      "usage_usec 10\nuser_usec 7\nsystem_usec 3\nnr_periods 0\n",
		"memory.peak":   "8192\n",
		"memory.events": "low 0\nhigh 0\nmax 2\noom 1\noom_kill 0\n",
		"pids.events":   "max 0\n",
	})
	total, user, sys, ok := u.cpuTime()
	if !ok || total != 10*time.Microsecond || user != 7*time.Microsecond || sys != 3*time.Microsecond {
		t.Errorf("cpuTime = %v, %v, %v, %v; want 10µs, 7µs, 3µs, true", total, user, sys, ok)
	}
	e := runtime.ExitInfo{}
	u.fill(&e)
	if e.MaxRSS != 8192 || !e.PeakSinceExec || e.OOMKilled || e.PidsLimitHit {
		t.Errorf("fill: %+v; want the peak 8192 since exec, no OOM kill, no pids limit", e)
	}
}

// TestUsageFilesNotReset: a peak that cannot be reset (here a file with
// no write: /proc/self/oom_score, a number) is the cgroup's whole life:
// the larger of it and rusage's is kept; missing files leave the report
// as it is, and no CPU time means the caller waits.
func TestUsageFilesNotReset(t *testing.T) {
	mem := t.TempDir()
	if err := os.Symlink("/proc/self/oom_score", filepath.Join(mem, "memory.max_usage_in_bytes")); err != nil {
		t.Fatal(err)
	}
	u := openUsage(&started{memDir: mem, cpuDir: t.TempDir(), pidsDir: t.TempDir()}, true)
	defer u.close()
	if u.fds[filePeak] < 0 {
		t.Fatal("control: /proc/self/oom_score could not be opened")
	}
	if u.sinceExec {
		t.Error("a peak that cannot be written was taken as reset")
	}
	if _, _, _, ok := u.cpuTime(); ok {
		t.Error("cpuTime ok without any CPU file")
	}
	e := runtime.ExitInfo{MaxRSS: 1 << 40}
	u.fill(&e)
	if e.MaxRSS != 1<<40 || e.PeakSinceExec || e.OOMKilled || e.PidsLimitHit {
		t.Errorf("fill: %+v; want rusage's larger peak kept, nothing else", e)
	}
	var none *usageFiles
	none.fill(&e)
	none.close()
	if _, _, _, ok := none.cpuTime(); ok {
		t.Error("a nil usageFiles reported CPU time")
	}
}
