//go:build integration

// Package clients_test drives the runtime under test ($RUNTIME, default
// <repo>/bin/skillrun) through real clients installed on the host: containerd's
// runc shim (via a private containerd daemon and ctr) and podman (as root and
// rootless). The same tests pass with RUNTIME=$(command -v runc), which proves them.
//
// Every test skips with a printed reason when it cannot run here (not root, a
// client binary missing, the rootless test user missing), and cleans up its
// daemons, mounts, cgroups and state with t.Cleanup even when it fails.
//
// Run: go test -tags integration -v ./tests/clients/
package clients_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
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

	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/tests/internal/hostcheck"
	"github.com/skillrun/skillrun/tests/internal/rootfs"
)

// cmdTimeout bounds every single client command.
const cmdTimeout = 60 * time.Second

// stage holds a copy of the runtime under test for the rootless test user
// when the checkout sits in a folder closed to it.
var stage hostcheck.Stage

func TestMain(m *testing.M) {
	code := m.Run()
	stage.Remove()
	os.Exit(code)
}

// runtimeUnderTest returns the absolute path of the runtime under test.
func runtimeUnderTest(t *testing.T) string {
	t.Helper()
	r := os.Getenv("RUNTIME")
	if r == "" {
		root, err := filepath.Abs("../..")
		if err != nil {
			t.Fatal(err)
		}
		r = filepath.Join(root, "bin", "skillrun")
		if _, err := os.Stat(r); err != nil {
			t.Fatalf("runtime under test %s not found (build it with `go build -o bin/skillrun ./cmd/skillrun` or set RUNTIME=/abs/path): %v", r, err)
		}
	}
	if !filepath.IsAbs(r) {
		p, err := exec.LookPath(r)
		if err != nil {
			t.Fatalf("RUNTIME=%q not found on PATH: %v", r, err)
		}
		r = p
	}
	abs, err := filepath.Abs(r)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(abs)
	if err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("runtime under test %s is not an executable file (err=%v)", abs, err)
	}
	return abs
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("SKIP: %s needs root (euid is %d)", t.Name(), os.Geteuid())
	}
}

// requireBinary returns the path of a client binary or skips the test.
func requireBinary(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("SKIP: client binary %q not found on PATH (install it with hack/install-deps.sh test): %v", name, err)
	}
	return p
}

// tempDir makes a short-named temporary directory (unix socket paths are limited
// to 108 bytes, so t.TempDir is too long) and registers its safe removal:
// anything mounted below it is lazily unmounted deepest first, then the tree is
// removed without crossing file systems.
func tempDir(t *testing.T, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(t, d) })
	return d
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return strings.Count(out[i], "/") > strings.Count(out[j], "/")
	})
	return out
}

func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func removeTree(t *testing.T, dir string) {
	for _, mp := range mountsUnder(dir) {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
			t.Logf("cleanup: umount -l %s: %v", mp, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "rm", "-rf", "--one-file-system", dir).CombinedOutput(); err != nil {
		t.Logf("cleanup: rm -rf --one-file-system %s: %v: %s", dir, err, out)
	}
}

// busyboxRootfs builds a minimal root file system from the static busybox
// in dir/rootfs, skipping the test when the host has none.
func busyboxRootfs(t *testing.T, dir string) string {
	t.Helper()
	dst := filepath.Join(dir, "rootfs")
	err := rootfs.Busybox(dst, map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
		"etc/group":  "root:x:0:\nnobody:x:65534:\n",
		"etc/mtab":   "-> /proc/mounts",
	})
	if errors.Is(err, rootfs.ErrNoBusybox) {
		t.Skipf("SKIP: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// argvWrapper writes an executable named name into dir that appends its
// arguments (one call per line) to log and then execs real, so the process the
// client started is the runtime itself. It is how the tests see what the
// clients called and prove which binary they used.
func argvWrapper(t *testing.T, dir, name, real, log string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	script := fmt.Sprintf("#!/bin/sh\n# generated by tests/clients: log argv, then exec the runtime under test\nprintf '%%s\\n' \"$*\" >> %s\nexec %s \"$@\"\n",
		shellQuote(log), shellQuote(real))
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	// The rootless client runs the wrapper as another user.
	if err := os.Chmod(log, 0o666); err != nil {
		t.Fatal(err)
	}
	return p
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// tail returns the last n lines of a file, for failure messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// result is one finished client command.
type result struct {
	argv   []string
	code   int
	stdout string
	stderr string
	err    error
}

func (r result) String() string {
	return fmt.Sprintf("command: %s\nexit code: %d (err: %v)\nstdout:\n%s\nstderr:\n%s",
		strings.Join(r.argv, " "), r.code, r.err, indent(r.stdout), indent(r.stderr))
}

func indent(s string) string {
	if s == "" {
		return "    (empty)"
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// cmdSpec describes how to start a client command.
type cmdSpec struct {
	env     []string // full environment when non-nil
	stdin   string
	dir     string
	timeout time.Duration // cmdTimeout when zero
}

// runCmd runs argv with a timeout and returns what happened; it never fails the test.
func runCmd(ctx context.Context, spec cmdSpec, argv ...string) result {
	timeout := spec.timeout
	if timeout == 0 {
		timeout = cmdTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = spec.env
	cmd.Dir = spec.dir
	cmd.Stdin = strings.NewReader(spec.stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	r := result{argv: argv, stdout: stdout.String(), stderr: stderr.String(), err: err, code: -1}
	if cmd.ProcessState != nil {
		r.code = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() != nil {
		r.err = fmt.Errorf("timed out after %s: %w", timeout, ctx.Err())
	}
	return r
}

// runPTY runs argv with a new pseudo-terminal as its controlling terminal and
// stdin/stdout/stderr, and returns everything written to the terminal.
func runPTY(ctx context.Context, spec cmdSpec, argv ...string) result {
	r := result{argv: argv, code: -1}
	master, slave, err := openPTY()
	if err != nil {
		r.err = err
		return r
	}
	defer master.Close()
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = spec.env
	cmd.Dir = spec.dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		slave.Close()
		r.err = err
		return r
	}
	slave.Close()
	var buf bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			buf.Write(b[:n])
			if err != nil { // EIO once every slave fd is closed
				return
			}
		}
	}()
	r.err = cmd.Wait()
	if cmd.ProcessState != nil {
		r.code = cmd.ProcessState.ExitCode()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		master.Close()
		<-done
	}
	if ctx.Err() != nil {
		r.err = fmt.Errorf("timed out after %s: %w", cmdTimeout, ctx.Err())
	}
	r.stdout = strings.ReplaceAll(buf.String(), "\r\n", "\n")
	return r
}

func openPTY() (master, slave *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("unlockpt: %w", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("ptsname: %w", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, s, nil
}

// procsWithCmdline returns the live PIDs whose command line contains substr.
func procsWithCmdline(substr string) []int {
	var pids []int
	for _, p := range hostcheck.Procs(func(args []string) bool { return strings.Contains(strings.Join(args, " "), substr) }) {
		pids = append(pids, p.Pid)
	}
	return pids
}

func cmdlineOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// pidAlive reports whether pid exists and is not a zombie.
func pidAlive(pid int) bool { return hostcheck.Alive(pid) }

// waitFor polls cond until it is true or the timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// descendants returns every live descendant of the given pids.
func descendants(roots []int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	queue := append([]int(nil), roots...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// killSupervised kills the supervisors (shims, conmon) and, first, every
// process below them: the containers they hold, whatever the runtime under
// test did or failed to do.
func killSupervised(t *testing.T, what string, supervisors []int) {
	if len(supervisors) == 0 {
		return
	}
	if d := descendants(supervisors); len(d) > 0 {
		killPIDs(t, "process under a "+what, d)
	}
	killPIDs(t, what, supervisors)
}

// killCgroupProcs kills every process in the cgroup rel (and below it), in every hierarchy.
func killCgroupProcs(t *testing.T, rel string) {
	seen := map[int]bool{}
	for _, d := range cgroupDirs(rel) {
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			var pids []int
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
					seen[pid] = true
					pids = append(pids, pid)
				}
			}
			if len(pids) > 0 {
				killPIDs(t, "process in cgroup "+filepath.Dir(p), pids)
			}
			return nil
		})
	}
}

// killPIDs sends SIGKILL to each pid (best effort, for cleanup).
func killPIDs(t *testing.T, what string, pids []int) {
	for _, pid := range pids {
		if !pidAlive(pid) {
			continue
		}
		t.Logf("cleanup: killing leftover %s pid %d: %s", what, pid, cmdlineOf(pid))
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// freezerState reads the cgroup v1 freezer state of pid's cgroup (or the
// cgroup v2 cgroup.freeze value as FROZEN/THAWED) from the host side.
func freezerState(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "freezer" {
				s, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/freezer", parts[2], "freezer.state"))
				return strings.TrimSpace(string(s)), err
			}
		}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "0::") {
			for _, base := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
				s, err := os.ReadFile(filepath.Join(base, strings.TrimPrefix(line, "0::"), "cgroup.freeze"))
				if err == nil {
					if strings.TrimSpace(string(s)) == "1" {
						return "FROZEN", nil
					}
					return "THAWED", nil
				}
			}
		}
	}
	return "", fmt.Errorf("no freezer cgroup for pid %d", pid)
}

// cgroupDirs lists the cgroup directories (every v1 hierarchy and the v2
// mount) that exist for the relative cgroup path rel.
func cgroupDirs(rel string) []string {
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	var out []string
	for _, e := range ents {
		p := filepath.Join("/sys/fs/cgroup", e.Name(), rel)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			out = append(out, p)
		}
	}
	if st, err := os.Stat(filepath.Join("/sys/fs/cgroup", rel, "cgroup.procs")); err == nil && !st.IsDir() {
		out = append(out, filepath.Join("/sys/fs/cgroup", rel))
	}
	return out
}

// removeCgroups removes rel (and what is below it) in every hierarchy, deepest first.
func removeCgroups(t *testing.T, rel string) {
	killCgroupProcs(t, rel)
	waitFor(3*time.Second, func() bool {
		for _, d := range cgroupDirs(rel) {
			if b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs")); len(strings.TrimSpace(string(b))) > 0 {
				return false
			}
		}
		return true
	})
	for _, d := range cgroupDirs(rel) {
		var dirs []string
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Logf("cleanup: rmdir %s: %v", dirs[i], err)
			}
		}
	}
}

// randomSuffix returns a short unique suffix for names.
func randomSuffix() string {
	return strconv.FormatInt(time.Now().UnixNano()%1e9, 36) + strconv.Itoa(os.Getpid()%1000)
}

// runtimeStateGone asks the runtime itself (with the given global flags)
// whether it still knows the container, as the host sees it.
func runtimeStateGone(ctx context.Context, runtime string, globals []string, id string) (bool, result) {
	argv := append(append([]string{runtime}, globals...), "state", id)
	r := runCmd(ctx, cmdSpec{env: os.Environ()}, argv...)
	gone := r.code != 0 && strings.Contains(r.stdout+r.stderr, "does not exist")
	return gone, r
}
