//go:build integration

package hostile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skillrun/skillrun/tests/internal/hostcheck"
)

// The lifetime of a skill's sandbox (docs/security.md, "A sandbox never
// outlives its runner"): whatever kills the process that runs a sandbox
// (skill run, skill exec, sandbox, mcp serve), the sandbox's processes are
// gone within a second and nothing of it remains; its wall-clock limit
// holds even when that process is stopped. The OCI verbs keep runc's
// semantics. Every check is the host's: processes by pid and start time,
// state, TMPDIR, mounts, cgroups by container ID, the network namespace.

func cmdline(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
}

func allPids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// markerProc finds the live process whose command line is exactly
// "sleep MARKER".
func markerProc(marker string) (hostcheck.ProcID, bool) {
	for _, pid := range allPids() {
		if a := cmdline(pid); len(a) == 2 && a[0] == "sleep" && a[1] == marker {
			if p, ok := hostcheck.ProcIDOf(pid); ok && p.Alive() {
				return p, true
			}
		}
	}
	return hostcheck.ProcID{}, false
}

// sandbox is what the host sees of the containers under a state root.
type sandbox struct {
	ids   map[string]bool
	procs map[hostcheck.ProcID]bool
	netns map[string]bool // "net:[INODE]" of each container's init
	// marks are in the command line of every process of these sandboxes
	// and of their runners, and of no other test's (hostcheck.NetnsHolders:
	// a namespace's number is reused by the next namespace made).
	marks []string
}

func newSandbox(marks ...string) *sandbox {
	return &sandbox{ids: map[string]bool{}, procs: map[hostcheck.ProcID]bool{}, netns: map[string]bool{}, marks: marks}
}

// look adds what runs now under root: each container's ID, every
// process in the pid namespace of its init (from state.json), and the
// init's network namespace.
func (s *sandbox) look(root string) {
	ents, _ := os.ReadDir(root)
	nsOf := func(pid int, kind string) string {
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
		return l
	}
	hostPid := nsOf(os.Getpid(), "pid")
	pidns := map[string]bool{}
	for _, e := range ents {
		if !e.IsDir() || e.Name() == "@locks" {
			continue
		}
		s.ids[e.Name()] = true
		data, err := os.ReadFile(filepath.Join(root, e.Name(), "state.json"))
		var st struct {
			Pid   int    `json:"init_process_pid"`
			Start uint64 `json:"init_process_start"`
		}
		if err != nil || json.Unmarshal(data, &st) != nil || st.Pid <= 0 {
			continue
		}
		if p, ok := hostcheck.ProcIDOf(st.Pid); !ok || p.Start != st.Start {
			continue
		}
		if ns := nsOf(st.Pid, "pid"); ns != "" && ns != hostPid {
			pidns[ns] = true
		}
		if ns := nsOf(st.Pid, "net"); ns != "" {
			s.netns[ns] = true
		}
	}
	if len(pidns) == 0 {
		return
	}
	for _, pid := range allPids() {
		if pidns[nsOf(pid, "pid")] {
			if p, ok := hostcheck.ProcIDOf(pid); ok && p.Alive() {
				s.procs[p] = true
			}
		}
	}
}

// alive lists the recorded processes still alive.
func (s *sandbox) alive() []hostcheck.ProcID {
	var out []hostcheck.ProcID
	for p := range s.procs {
		if p.Alive() {
			out = append(out, p)
		}
	}
	return out
}

func (s *sandbox) idList() []string {
	var out []string
	for id := range s.ids {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// nsHolders lists what still holds the network namespaces: a process of
// these sandboxes or their runners in it, or holding a descriptor of it,
// or an nsfs mount of it on the host.
func (s *sandbox) nsHolders() []string { return hostcheck.NetnsHolders(s.netns, s.marks...) }

// ourGuards lists the live lifetime guards reparented to this test
// process (the subreaper) once their runner died: each must end once it
// has removed what it guarded.
func ourGuards() []int { return guardsOf(false) }

// guardsOf lists the lifetime guards whose parent is this test process,
// zombies included when zombies is set.
func guardsOf(zombies bool) []int {
	var out []int
	for _, pid := range allPids() {
		if a := cmdline(pid); len(a) == 2 && a[1] == "__skillrun-guard" {
			if st, ppid, _, ok := hostcheck.ProcStat(pid); ok && ppid == os.Getpid() && (zombies || st != 'Z') {
				out = append(out, pid)
			}
		} else if st, ppid, _, ok := hostcheck.ProcStat(pid); zombies && ok && st == 'Z' && ppid == os.Getpid() {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "exe" {
				out = append(out, pid) // a zombie has no command line: /proc/self/exe's comm
			}
		}
	}
	return out
}

// guardsDescribed describes the guards that are children of pid (state
// and threads: one thread is the stub, more the Go guard), for a failure
// to say what the guard was doing.
func guardsDescribed(pid int) []string {
	var out []string
	for _, p := range allPids() {
		if a := cmdline(p); len(a) == 2 && a[1] == "__skillrun-guard" {
			if st, ppid, _, ok := hostcheck.ProcStat(p); ok && ppid == pid {
				status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
				threads := ""
				for _, l := range strings.Split(string(status), "\n") {
					if v, ok := strings.CutPrefix(l, "Threads:"); ok {
						threads = strings.TrimSpace(v)
					}
				}
				out = append(out, fmt.Sprintf("%d state %c threads %s", p, st, threads))
			}
		}
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

// runnerPid is the skillrun process of cmd: cmd itself as root, the
// child of runuser as the test user (0 if it never appears).
func runnerPid(m *mode, cmd *exec.Cmd) int {
	if !m.rootless() {
		return cmd.Process.Pid
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		if f := strings.Fields(string(data)); len(f) > 0 {
			pid, _ := strconv.Atoi(f[0])
			return pid
		}
	}
	return 0
}

// sleeperSkill writes a skill whose entry point is `sleep MARKER` (a
// command line no other process has) with the wall-clock limit timeout,
// and returns its folder, name and marker.
func sleeperSkill(t testing.TB, m *mode, timeout string) (dir, name, marker string) {
	name = uniqueSkill("sleeper")
	marker = strconv.Itoa(100000 + rand.Intn(800000))
	dir = m.skill(t, "skills", name, map[string]string{
		"SKILL.md":        skillMD(name),
		"sandbox.yaml":    "entry: scripts/main.sh\nlimits:\n  timeout: " + timeout + "\n",
		"scripts/main.sh": "#!/bin/sh\nexec sleep " + marker + "\n",
	})
	return dir, name, marker
}

// workspace is a folder the sandbox's host user can write (as root: one
// owned by nobody, the user the sandbox then maps to).
func (m *mode) workspace(t testing.TB) string {
	t.Helper()
	ws := m.mkdir(t, "ws-"+strconv.Itoa(rand.Intn(1e6)))
	if !m.rootless() {
		if err := os.Chown(ws, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// waitFor polls cond every 5 ms for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// killedRunner is a started runner whose sandbox runs `sleep MARKER`.
type killedRunner struct {
	cmd    *exec.Cmd
	pid    int
	marker hostcheck.ProcID
	sb     *sandbox
	// pgid is the runner's own process group (startRunnerGroup), 0 when
	// it shares this test's: killAndCheck then kills the whole group.
	pgid int
}

// startRunner starts skillrun with args (stdin, when set, is written and
// left open), waits until the sandbox's `sleep MARKER` runs, and records
// what the host sees of its sandboxes. It checks the controls: the
// marker lives, in a pid namespace of its own, and the runner lives.
func startRunner(t *testing.T, m *mode, marker string, stdin io.Reader, args ...string) *killedRunner {
	t.Helper()
	return startRunnerIn(t, m, marker, stdin, false, args...)
}

// startRunnerGroup is startRunner with the runner (as the test user:
// runuser and the runner) in a process group of its own, as a shell's
// job or a supervisor's child is.
func startRunnerGroup(t *testing.T, m *mode, marker string, args ...string) *killedRunner {
	t.Helper()
	return startRunnerIn(t, m, marker, nil, true, args...)
}

func startRunnerIn(t *testing.T, m *mode, marker string, stdin io.Reader, group bool, args ...string) *killedRunner {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	cmd := m.command(ctx, opts{}, args...)
	cmd.Stdin = stdin
	if group {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	logf, err := os.CreateTemp(tmpBase, "runner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("runner output:\n%s", b)
		}
		os.Remove(logf.Name())
		logf.Close()
	})
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The sandbox's processes carry the marker, the runner's command line
	// the skill's folder (killAndCheck adds the skill's name).
	r := &killedRunner{cmd: cmd, pid: runnerPid(m, cmd), sb: newSandbox(marker)}
	if r.pid == 0 {
		t.Fatal("the skillrun process under runuser never appeared")
	}
	if group {
		r.pgid = cmd.Process.Pid
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for p := range r.sb.procs {
			if p.Alive() && hostcheck.InOtherPidNS(p.Pid) {
				_ = syscall.Kill(p.Pid, syscall.SIGKILL)
			}
		}
		for id := range r.sb.ids {
			removeCgroups(id)
		}
	})
	var ok bool
	if !waitFor(60*time.Second, func() bool { r.marker, ok = markerProc(marker); return ok }) {
		t.Fatalf("the sandbox's `sleep %s` never ran", marker)
	}
	r.sb.look(m.root)
	switch {
	case !r.sb.procs[r.marker]:
		t.Fatalf("control: `sleep %s` (pid %d) is not among the processes of the containers under %s: %v", marker, r.marker.Pid, m.root, r.sb.procs)
	case !hostcheck.InOtherPidNS(r.marker.Pid):
		t.Fatalf("control: `sleep %s` runs in the host's pid namespace", marker)
	case !pidAliveAny(r.pid):
		t.Fatalf("control: the runner %d is not running", r.pid)
	case r.pgid != 0 && pgrpOf(r.pid) != r.pgid:
		t.Fatalf("control: the runner %d is in process group %d, not its own %d", r.pid, pgrpOf(r.pid), r.pgid)
	case r.pgid != 0 && pgrpOf(r.marker.Pid) == r.pgid:
		t.Fatalf("control: the sandbox's `sleep %s` is in the runner's process group %d: a kill of the group reaches it directly", marker, r.pgid)
	}
	return r
}

// pgrpOf is pid's process group (0 if unknown).
func pgrpOf(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return 0
	}
	pgrp, _ := strconv.Atoi(f[2])
	return pgrp
}

// guardsIn lists the lifetime guards of the runner pid (its children)
// that are in process group pgrp.
func guardsIn(pid, pgrp int) []int {
	var out []int
	for _, p := range allPids() {
		if a := cmdline(p); len(a) == 2 && a[1] == "__skillrun-guard" {
			if _, ppid, _, ok := hostcheck.ProcStat(p); ok && ppid == pid && pgrpOf(p) == pgrp {
				out = append(out, p)
			}
		}
	}
	return out
}

func pidAliveAny(pid int) bool {
	st, _, _, ok := hostcheck.ProcStat(pid)
	return ok && st != 'Z' && st != 'X'
}

// killAndCheck SIGKILLs the runner (its whole process group when it has
// its own) and checks from the host: every process of its sandboxes gone
// within a second (by pid and start time), then nothing left (state,
// TMPDIR, mounts, cgroups by container ID, processes naming them, the
// network namespaces) and its guard gone. It returns when the sandboxes'
// processes were seen gone (zero: not within the second).
func (r *killedRunner) killAndCheck(t *testing.T, m *mode, skills ...string) (gone time.Time) {
	t.Helper()
	r.sb.look(m.root) // what else started meanwhile
	r.sb.marks = append(r.sb.marks, skills...)
	killed := time.Now()
	if r.pgid != 0 {
		if err := syscall.Kill(-r.pgid, syscall.SIGKILL); err != nil {
			t.Fatalf("SIGKILL the runner's process group: %v", err)
		}
	} else if err := syscall.Kill(r.pid, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL the runner: %v", err)
	}
	// runuser stops itself when its child stops (a stopped runner).
	_ = r.cmd.Process.Signal(syscall.SIGCONT)
	if !waitFor(time.Second, func() bool { return len(r.sb.alive()) == 0 }) {
		t.Errorf("1 s after the runner's SIGKILL, %d of its sandboxes' %d processes still live: %v", len(r.sb.alive()), len(r.sb.procs), r.sb.alive())
	} else {
		gone = time.Now()
		t.Logf("%d sandbox processes (%d containers) gone %s after the runner's SIGKILL", len(r.sb.procs), len(r.sb.ids), time.Since(killed).Round(time.Millisecond))
	}
	_ = r.cmd.Wait()
	if left := m.leftovers(r.sb.idList(), skills, 2*time.Second); len(left) > 0 {
		t.Errorf("left behind after the runner's SIGKILL: %v", left)
	}
	if !waitFor(2*time.Second, func() bool { return len(r.sb.nsHolders()) == 0 }) {
		t.Errorf("the sandboxes' network namespaces are still held: %v", r.sb.nsHolders())
	}
	if !waitFor(2*time.Second, func() bool { return len(ourGuards()) == 0 }) {
		t.Errorf("lifetime guards still running: %v", ourGuards())
	}
	return gone
}

// TestLifetimeRunnerKilled: skill run, skill exec and sandbox, each
// SIGKILLed while its sandbox runs: the sandbox dies within a second and
// nothing of it remains.
func TestLifetimeRunnerKilled(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		dir, name, marker := sleeperSkill(t, m, "60s")
		ws := m.workspace(t)
		for _, tc := range []struct {
			verb string
			args []string
		}{
			{"skill run", []string{"skill", "run", dir}},
			{"skill exec", []string{"skill", "exec", dir, "--", "sleep", marker}},
			{"sandbox", []string{"sandbox", "--workspace", ws, "--", "sleep", marker}},
		} {
			t.Run(strings.ReplaceAll(tc.verb, " ", "-"), func(t *testing.T) {
				r := startRunner(t, m, marker, nil, tc.args...)
				r.killAndCheck(t, m, name)
			})
		}
	})
}

// mcpFrames are the lines of a stdio MCP session that calls tool.
func mcpFrames(tool string) string {
	frame := func(v any) string { b, _ := json.Marshal(v); return string(b) + "\n" }
	return frame(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}}) +
		frame(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}) +
		frame(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": map[string]any{}}})
}

// TestLifetimeMCPServeKilled: mcp serve SIGKILLed mid-call, with cold
// sandboxes (--pool 0) and with warm pools: every sandbox it ran or kept
// dies within a second and nothing of them remains.
func TestLifetimeMCPServeKilled(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		for _, pool := range []string{"0", "2"} {
			t.Run("pool-"+pool, func(t *testing.T) {
				dir, name, marker := sleeperSkill(t, m, "60s")
				// The session's stdin stays open: its end would end the
				// server. A pipe file, not a reader: Wait must not wait for
				// a copy.
				pr, pw, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { pw.Close() })
				if _, err := io.WriteString(pw, mcpFrames(name)); err != nil {
					t.Fatal(err)
				}
				r := startRunner(t, m, marker, pr, "mcp", "serve", "--skills", dir, "--watch", "0", "--pool", pool)
				pr.Close()
				if pool != "0" {
					// The pool's sandboxes, besides the call's.
					waitFor(10*time.Second, func() bool {
						r.sb.look(m.root)
						return len(r.sb.ids) >= 2
					})
				}
				time.Sleep(200 * time.Millisecond) // mid-call
				r.killAndCheck(t, m, name)
			})
		}
	})
}

// TestLifetimeTimeoutRunnerStopped: a skill with a 5 s limit whose
// runner is SIGSTOPped once the skill runs is still killed at 5 s (the
// guard's deadline, 250 ms after the limit). Continued, the runner
// reports the timeout and leaves nothing; SIGKILLed while still stopped,
// it leaves nothing either.
func TestLifetimeTimeoutRunnerStopped(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		for _, then := range []string{"continued", "killed"} {
			t.Run(then, func(t *testing.T) {
				dir, name, marker := sleeperSkill(t, m, "5s")
				start := time.Now()
				r := startRunner(t, m, marker, nil, "skill", "run", dir)
				if err := syscall.Kill(r.pid, syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				if !waitFor(time.Second, func() bool { st, _, _, _ := hostcheck.ProcStat(r.pid); return st == 'T' }) {
					t.Fatal("control: the runner is not stopped")
				}
				time.Sleep(time.Until(start.Add(4500 * time.Millisecond)))
				if !r.marker.Alive() {
					t.Fatalf("control: the skill died %s after the start, before its 5 s limit", time.Since(start))
				}
				if !waitFor(3*time.Second, func() bool { return !r.marker.Alive() }) {
					t.Fatalf("the skill still runs %s after the start of a run with a 5 s limit (its runner stopped); the runner's guards: %v",
						time.Since(start).Round(time.Millisecond), guardsDescribed(r.pid))
				}
				took := time.Since(start)
				t.Logf("the skill was killed %s after the start (limit 5 s, runner stopped)", took.Round(time.Millisecond))
				if took > 6*time.Second {
					t.Errorf("killed %s after the start: want 5 s and the guard's 250 ms grace (plus the start-up)", took.Round(time.Millisecond))
				}
				if st, _, _, _ := hostcheck.ProcStat(r.pid); st != 'T' {
					t.Fatalf("control: the runner is no longer stopped (%c): the runner, not the guard, may have killed it", st)
				}
				if then == "killed" {
					r.killAndCheck(t, m, name)
					return
				}
				_ = syscall.Kill(r.pid, syscall.SIGCONT)
				_ = r.cmd.Process.Signal(syscall.SIGCONT) // runuser stopped itself with its child
				_ = r.cmd.Wait()
				out, _ := os.ReadFile(r.cmd.Stdout.(*os.File).Name())
				if code := r.cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(string(out), `"stopped_reason":"timeout"`) {
					t.Errorf("continued runner: exit %d, want a timeout result\n%s", code, out)
				}
				if left := m.leftovers(r.sb.idList(), []string{name}, 2*time.Second); len(left) > 0 {
					t.Errorf("left behind: %v", left)
				}
			})
		}
	})
}

// TestLifetimeRunnerGroupKilled: a supervisor's kill of the runner's whole
// process group (a shell's job, timeout(1) --kill-after, `kill -9 --
// -PGID`) does not reach the lifetime guard, which runs in a session of
// its own. A skill run with a 3 s limit, its group SIGKILLed 1 s in: the
// sandbox is gone within a second of the kill, well before its deadline
// (+1 s), and nothing remains. Its group SIGSTOPped instead (the runner
// and, as the test user, runuser): the skill is still killed at its 3 s
// deadline (+1 s, the deadline taken from when the skill's process was
// seen); the group SIGKILLed then leaves nothing. Controls: the
// runner leads its own group, the sandbox's process is not in it, the
// guard is not in it either.
func TestLifetimeRunnerGroupKilled(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		for _, how := range []string{"killed", "stopped-then-killed"} {
			t.Run(how, func(t *testing.T) {
				dir, name, marker := sleeperSkill(t, m, "3s")
				start := time.Now()
				r := startRunnerGroup(t, m, marker, "skill", "run", dir)
				if g := guardsIn(r.pid, r.pgid); len(g) > 0 {
					t.Fatalf("the runner's guards %v are in its process group %d: a kill of the group reaches them", g, r.pgid)
				}
				// The skill's clock started before its process was seen:
				// its deadline is at the latest 3 s after that.
				deadline := time.Now().Add(3 * time.Second)
				if how == "killed" {
					time.Sleep(time.Until(start.Add(time.Second)))
					if !r.marker.Alive() {
						t.Fatal("control: the skill died before its runner's group was killed")
					}
					gone := r.killAndCheck(t, m, name)
					if !gone.IsZero() && gone.After(deadline.Add(time.Second)) {
						t.Errorf("the sandbox's processes were not gone by the 3 s deadline + 1 s (gone %s after the start)", gone.Sub(start).Round(time.Millisecond))
					}
					return
				}
				if err := syscall.Kill(-r.pgid, syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				if !waitFor(time.Second, func() bool { st, _, _, _ := hostcheck.ProcStat(r.pid); return st == 'T' }) {
					t.Fatal("control: the runner is not stopped")
				}
				if !waitFor(time.Until(deadline.Add(3*time.Second)), func() bool { return !r.marker.Alive() }) {
					t.Fatalf("the skill still runs %s after the start of a run with a 3 s limit (its runner's process group stopped); the runner's guards: %v",
						time.Since(start).Round(time.Millisecond), guardsDescribed(r.pid))
				}
				took, late := time.Since(start), time.Since(deadline)
				t.Logf("the skill was killed %s after the start, %s after its deadline at the latest (limit 3 s, the runner's process group stopped)", took.Round(time.Millisecond), late.Round(time.Millisecond))
				if took < 3*time.Second {
					t.Errorf("the skill died %s after the start, before its 3 s limit", took.Round(time.Millisecond))
				}
				if late > time.Second {
					t.Errorf("the skill was killed %s after its 3 s deadline, want within 1 s (the guard's grace is 250 ms)", late.Round(time.Millisecond))
				}
				if st, _, _, _ := hostcheck.ProcStat(r.pid); st != 'T' {
					t.Fatalf("control: the runner is no longer stopped (%c): the runner, not the guard, may have killed it", st)
				}
				r.killAndCheck(t, m, name)
			})
		}
	})
}

// TestLifetimeSoak: 50 concurrent skill runs with network (an allowlist
// to a loopback origin), each SIGKILLed at a random moment (before its
// sandbox, during its start, mid-request, after its end): every sandbox
// process seen from the host is gone, nothing is left behind, no guard
// lingers, and the next run succeeds.
func TestLifetimeSoak(t *testing.T) {
	n := 50
	if testing.Short() {
		n = 16
	}
	forEachMode(t, func(t *testing.T, m *mode) {
		// A short TMPDIR: the egress socket's path (a bundle folder's
		// egress.sock) must fit a unix socket address.
		short, err := os.MkdirTemp("/tmp", "skl-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(short) })
		if err := os.Chmod(short, 0o711); err != nil {
			t.Fatal(err)
		}
		m.chown(t, short)
		m.tmp = short
		o := hostcheck.StartOrigin(t)
		hp := fmt.Sprintf("api.test:%d", o.Port)
		name := uniqueSkill("netsoak")
		dir := m.skill(t, "skills", name, map[string]string{
			"SKILL.md": skillMD(name),
			// The name in the script's arguments: its processes carry it
			// (and the runners, in the skill's folder).
			"sandbox.yaml": "entry: scripts/main.py\nargs: [" + name + "]\nlimits:\n  timeout: 60s\n",
			"scripts/main.py": `import json, sys, time, urllib.request
quick = json.load(sys.stdin).get("quick", False)
n, end = 0, time.time() + (0 if quick else 2)
while True:
    urllib.request.urlopen("http://` + hp + `/soak", timeout=10).read()
    n += 1
    if time.time() >= end:
        break
print(json.dumps({"requests": n}))
`,
		})
		flags := []string{"--allow-host", hp, "--resolve", hp + ":127.0.0.1"}
		t.Cleanup(func() {
			for _, d := range cgroupDirsPrefixed(skillIDs(name)) {
				hostcheck.RemoveCgroup(d)
			}
		})
		seed := time.Now().UnixNano()
		t.Logf("seed %d", seed)
		rnd := rand.New(rand.NewSource(seed))
		sb := newSandbox(name)
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
					sb.look(m.root)
				}
			}
		}()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var lastKill time.Time
		finished := 0
		outputs := make([]strings.Builder, n)
		for i := range n {
			delay := time.Duration(rnd.Intn(3000)) * time.Millisecond
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
				defer cancel()
				cmd := m.command(ctx, opts{}, append(append([]string{"skill", "run", "--input", "{}"}, flags...), dir)...)
				cmd.Stdout, cmd.Stderr = &outputs[i], &outputs[i]
				if err := cmd.Start(); err != nil {
					t.Error(err)
					return
				}
				pid := runnerPid(m, cmd)
				if pid == 0 {
					t.Error("the skillrun process under runuser never appeared")
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
					return
				}
				time.Sleep(delay)
				_ = syscall.Kill(pid, syscall.SIGKILL)
				mu.Lock()
				if now := time.Now(); now.After(lastKill) {
					lastKill = now
				}
				mu.Unlock()
				if err := cmd.Wait(); err == nil {
					mu.Lock()
					finished++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(stop)
		<-sampled
		sb.look(m.root)
		t.Logf("%d runs SIGKILLed at random (%d finished first); %d containers and %d sandbox processes seen; origin served %d requests",
			n, finished, len(sb.ids), len(sb.procs), len(o.Seen()))
		if len(sb.procs) == 0 || len(o.Seen()) == 0 {
			for i := range min(n, 3) {
				t.Logf("run %d: %s", i, outputs[i].String())
			}
			t.Fatal("control: no sandbox process was seen running, or none reached the origin: the soak proves nothing")
		}
		if !waitFor(max(time.Until(lastKill.Add(time.Second)), 0), func() bool { return len(sb.alive()) == 0 }) {
			t.Errorf("1 s after the last SIGKILL, sandbox processes still live: %v", sb.alive())
		}
		// The guard retries a removal for 5 s (a create cut short may keep
		// its bundle busy a while under load).
		if left := m.leftovers(append(sb.idList(), skillIDs(name)...), []string{name}, 6*time.Second); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
		if left := cgroupDirsPrefixed(skillIDs(name)); len(left) > 0 {
			t.Errorf("cgroups left behind: %v", left)
		}
		if !waitFor(2*time.Second, func() bool { return len(sb.nsHolders()) == 0 }) {
			t.Errorf("network namespaces still held: %v", sb.nsHolders())
		}
		if !waitFor(2*time.Second, func() bool { return len(ourGuards()) == 0 }) {
			t.Errorf("lifetime guards still running: %v", ourGuards())
		}
		before := len(o.Seen())
		res := m.run(t, opts{}, append(append([]string{"skill", "run", "--input", `{"quick": true}`}, flags...), dir)...)
		if res.code != 0 || !strings.Contains(res.stdout, `"requests":1`) || len(o.Seen()) != before+1 {
			t.Errorf("the run after the soak\n%s", res)
		}
		m.assertClean(t, skillIDs(name), name)
	})
}

// TestLifetimeCleanExitReapsGuard: a run that ends normally ends its
// guard and reaps it: no guard, not even a zombie, is left to the
// runner's parent (an agent may be PID 1 of a container and never reap).
func TestLifetimeCleanExitReapsGuard(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		dir, name := copyExample(t, m, "text-stats")
		// Zombies of earlier tests' guards (killed runners') wait for
		// the reaper: only new ones count.
		before := map[int]bool{}
		for _, pid := range guardsOf(true) {
			before[pid] = true
		}
		res := m.run(t, opts{}, "skill", "run", "--input", `{"text": "a b"}`, dir)
		if res.code != 0 {
			t.Fatalf("skill run\n%s", res)
		}
		for _, pid := range guardsOf(true) {
			if !before[pid] {
				t.Errorf("skill run left its guard %d to its parent", pid)
			}
		}
		m.assertClean(t, skillIDs(name), name)
	})
}

// TestLifetimeOCIRunUnguarded: the OCI verbs keep runc's semantics. A
// foreground `skillrun run` SIGKILLed leaves its container running (runc
// does the same); a detached one outlives its call. Only the skill
// runner's sandboxes are guarded.
func TestLifetimeOCIRunUnguarded(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		bundle := m.newBundle(t, "bundle", nil, "sleep", "1000")
		fg, bg := uniqueID(t), uniqueID(t)
		m.track(t, fg)
		m.track(t, bg)
		cmd := m.command(context.Background(), opts{}, "run", "--bundle", bundle, fg)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := runnerPid(m, cmd)
		if !waitFor(30*time.Second, func() bool { return m.run(t, opts{}, "state", fg).code == 0 }) {
			t.Fatalf("control: the foreground container %s never appeared", fg)
		}
		st := m.waitStatus(t, fg, "running")
		init, ok := hostcheck.ProcIDOf(int(st["pid"].(float64)))
		if !ok {
			t.Fatalf("control: no init for %s", fg)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if res := m.run(t, opts{}, "run", "-d", "--bundle", bundle, bg); res.code != 0 {
			t.Fatalf("run -d\n%s", res)
		}
		time.Sleep(1500 * time.Millisecond)
		if !init.Alive() {
			t.Errorf("the container of a SIGKILLed foreground run died with it: runc's semantics are that it lives on")
		}
		if st := m.state(t, bg); st["status"] != "running" {
			t.Errorf("the detached container is %v 1.5 s after its run returned", st["status"])
		}
		if g := ourGuards(); len(g) > 0 {
			t.Errorf("the OCI verbs started lifetime guards: %v", g)
		}
	})
}
