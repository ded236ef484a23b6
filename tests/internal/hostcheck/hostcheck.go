//go:build linux

// Package hostcheck holds the host-side helpers several black-box suites
// share: reaping the zombies a subreaper inherits, and finding cgroup
// directories a container left behind.
package hostcheck

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ReapOrphans runs forever (start it in a goroutine of a subreaper test
// process) and reaps zombies the process inherited, as containerd's shim
// does: an exited process that joined a container's pid namespace (exec)
// keeps that namespace's init from finishing its exit until it is reaped.
// Children the tests start themselves (the binary named by binaryPath,
// runuser, env) are left to os/exec.
func ReapOrphans(binaryPath string) {
	self := strconv.Itoa(os.Getpid())
	own := map[string]bool{"runuser": true, "env": true}
	// The binary, and the companions it execs in place (skillrun
	// skill ... becomes skillrun-skills).
	for _, suffix := range append([]string{""}, companionSuffixes...) {
		rb := filepath.Base(binaryPath) + suffix
		if len(rb) > 15 {
			rb = rb[:15] // /proc/PID/stat's comm is truncated to 15 bytes
		}
		own[rb] = true
	}
	// A zombie child of ours may be a direct child whose exec.Cmd.Wait is
	// about to collect it (a "go build" the test ran): reaping it would
	// make that Wait fail with ECHILD. Orphans are reaped only once they
	// have stayed zombies for a while.
	seen := map[int]time.Time{}
	for {
		time.Sleep(30 * time.Millisecond)
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			st := string(data)
			open, closeIdx := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
			if open < 0 || closeIdx < 0 || closeIdx+2 >= len(st) {
				continue
			}
			f := strings.Fields(st[closeIdx+2:])
			if len(f) < 2 || f[0] != "Z" || f[1] != self || own[st[open+1:closeIdx]] {
				continue
			}
			if first, ok := seen[pid]; !ok {
				seen[pid] = time.Now()
				continue
			} else if time.Since(first) < 2*time.Second {
				continue
			}
			delete(seen, pid)
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
}

// CgroupDirsNamed finds directories called id in every cgroup hierarchy
// (depth-limited: the id is unique, any hit is a leftover).
func CgroupDirsNamed(id string) []string {
	if id == "" || id == "." || id == ".." || strings.Contains(id, "/") {
		return nil
	}
	return CgroupDirs(4, func(name string) bool { return name == id })
}

// CgroupDirs finds, in every cgroup hierarchy down to depth levels below
// its root, the directories whose name match accepts (not descending
// into one that matched).
func CgroupDirs(depth int, match func(name string) bool) []string {
	var found []string
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hier {
		base := strings.Count(h, "/")
		filepath.WalkDir(h, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if strings.Count(p, "/")-base > depth {
				return fs.SkipDir
			}
			if match(d.Name()) {
				found = append(found, p)
				return fs.SkipDir
			}
			return nil
		})
	}
	return found
}

// Subreap makes the test process the subreaper of what the runtime
// leaves, like containerd's shim (a SIGKILLed runtime's container init is
// reparented to it; pid 1 here does not reap), and reaps such orphans in
// the background so that their exit can be observed.
func Subreap(binaryPath string) error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	go ReapOrphans(binaryPath)
	return nil
}

// SkillrunBinary is the binary under test: $SKILLRUN, else
// <repo>/bin/skillrun, made absolute. The error says how to get one when
// it is missing.
func SkillrunBinary(repo string) (string, error) {
	bin := os.Getenv("SKILLRUN")
	if bin == "" {
		bin = filepath.Join(repo, "bin", "skillrun")
	}
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		return bin, fmt.Errorf("skillrun binary %s not found or not executable (build it with make, or set SKILLRUN)", bin)
	}
	return bin, nil
}

// ProcsWithArg lists live (not zombie) processes other than the caller
// that hold one of needles as a whole command-line argument, or, for a
// needle that is an absolute path, an argument naming that path or a
// path under it. Whole arguments, not substrings: a container ID such as
// "a b" or "x" must not match an unrelated process whose script text
// happens to contain those letters (a CI runner's shell, an editor).
func ProcsWithArg(needles []string) []string {
	var out []string
	for _, p := range Procs(func(args []string) bool { return argMatches(args, needles) }) {
		out = append(out, fmt.Sprintf("%d: %s", p.Pid, strings.Join(p.Args, " ")))
	}
	return out
}

// Proc is a live process: its pid and command line.
type Proc struct {
	Pid  int
	Args []string
}

// Procs lists the live (not zombie) processes other than the caller whose
// command line match accepts.
func Procs(match func(args []string) bool) []Proc {
	ents, _ := os.ReadDir("/proc")
	var out []Proc
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(data) == 0 {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
		if match(args) && Alive(pid) {
			out = append(out, Proc{Pid: pid, Args: args})
		}
	}
	return out
}

func argMatches(args, needles []string) bool {
	for _, a := range args {
		for _, n := range needles {
			if n == "" {
				continue
			}
			if a == n {
				return true
			}
			if filepath.IsAbs(n) && (strings.HasPrefix(a, strings.TrimSuffix(n, "/")+"/") || strings.HasSuffix(a, "="+n)) {
				return true
			}
		}
	}
	return false
}

// Alive says whether pid is a live process: not gone, not a zombie, not
// dying.
func Alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// InOtherPidNS says whether pid lives in a pid namespace other than the
// caller's: cleanups only ever kill container processes, never a host
// process a runtime might have misreported.
func InOtherPidNS(pid int) bool {
	theirs, err1 := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	ours, err2 := os.Readlink("/proc/self/ns/pid")
	return err1 == nil && err2 == nil && theirs != ours
}

// RemoveCgroup removes the cgroup folder dir a test found left behind,
// first killing the processes in it that live in another pid namespace
// (a container's, never a host one), retrying for up to a second while
// the kernel lets them go.
func RemoveCgroup(dir string) {
	if data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
		for _, f := range strings.Fields(string(data)) {
			if p, err := strconv.Atoi(f); err == nil && p > 1 && InOtherPidNS(p) {
				_ = unix.Kill(p, unix.SIGKILL)
			}
		}
	}
	for i := 0; i < 50 && os.Remove(dir) != nil; i++ {
		if _, err := os.Stat(dir); err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ProcID is a process as the host sees it: its pid and start time (clock
// ticks after boot), so that a reused pid is never taken for it.
type ProcID struct {
	Pid   int
	Start uint64
}

// ProcStat reads the state, parent and start time of pid.
func ProcStat(pid int) (state byte, ppid int, start uint64, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0, 0, 0, false
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 20 {
		return 0, 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	start, _ = strconv.ParseUint(f[19], 10, 64)
	return f[0][0], ppid, start, true
}

// ProcIDOf is pid's ProcID (ok false: no such process).
func ProcIDOf(pid int) (ProcID, bool) {
	_, _, start, ok := ProcStat(pid)
	return ProcID{pid, start}, ok
}

// Alive: the same process (pid and start time) still exists and is
// neither a zombie nor dead (a zombie holds nothing but its pid).
func (p ProcID) Alive() bool {
	st, _, start, ok := ProcStat(p.Pid)
	return ok && start == p.Start && st != 'Z' && st != 'X'
}

// Netns is pid's network namespace as /proc shows it ("net:[INODE]"), ""
// when it cannot be read.
func Netns(pid int) string {
	l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	return l
}

// NetnsHolders lists what still holds one of the network namespaces
// netns ("net:[INODE]", as Netns gives them): a live process in it, a
// descriptor of it, or an nsfs mount of it on the host.
//
// The kernel hands a freed namespace's inode number to the next namespace
// made (the lowest free one), so once a namespace is gone its number may
// well name another test's sandbox, running at the same time as this one
// (go test runs the packages side by side). With marks, a process (in the
// namespace, or holding a descriptor of it) is a holder only when its
// command line contains one of them: the caller's markers, which only the
// processes of its own sandboxes and their runners carry.
func NetnsHolders(netns map[string]bool, marks ...string) []string {
	if len(netns) == 0 {
		return nil
	}
	ours := func(pid int) (string, bool) {
		what, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		cmd := strings.TrimSpace(strings.ReplaceAll(string(what), "\x00", " "))
		if len(marks) == 0 {
			if cmd == "" {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				cmd = strings.TrimSpace(string(comm))
			}
			return cmd, true
		}
		for _, m := range marks {
			if m != "" && strings.Contains(cmd, m) {
				return cmd, true
			}
		}
		return cmd, false
	}
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l := Netns(pid); netns[l] {
			if st, ppid, _, ok := ProcStat(pid); ok && st != 'Z' {
				// What it is, for the failure to say: its command line
				// (comm when it has none), state and parent.
				if what, mine := ours(pid); mine {
					out = append(out, fmt.Sprintf("process %d in %s (%q, state %c, parent %d)", pid, l, what, st, ppid))
				}
			}
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); netns[l] {
				if what, mine := ours(pid); mine {
					out = append(out, fmt.Sprintf("descriptor %s of %d (%q): %s", fd.Name(), pid, what, l))
				}
			}
		}
	}
	data, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 3 && netns[f[3]] {
			out = append(out, "mount "+line)
		}
	}
	return out
}
