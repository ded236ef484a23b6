//go:build integration

package tests

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/skillrun/skillrun/tests/internal/hostcheck"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// cmdTimeout bounds every runtime invocation; a hung runtime fails the test
// instead of the whole suite.
const cmdTimeout = 60 * time.Second

func requireSetup(t testing.TB) {
	t.Helper()
	if setupErr != nil {
		t.Fatalf("suite setup failed: %v", setupErr)
	}
}

func isRoot() bool { return os.Geteuid() == 0 }

func needRoot(t testing.TB) {
	t.Helper()
	requireSetup(t)
	if !isRoot() {
		t.Skip("needs root (run the suite as root)")
	}
}

func info() runtimeInfo { return runtimes[runtimeName] }

// ---------------------------------------------------------------- test user

// testUser is the unprivileged user the rootless tests run the runtime as.
type testUser struct {
	name     string
	uid, gid int
	home     string
	xdg      string
	// bin is the runtime under test as the user runs it: runtimeBin, or
	// a copy when the user cannot reach runtimeBin (a checkout in a
	// folder only root can enter).
	bin string
}

var (
	testUserOnce sync.Once
	testUserVal  *testUser
	testUserErr  error
)

// needTestUser returns the rootless test user, creating it with
// hack/ensure-test-user.sh when missing, or skips the test saying why.
func needTestUser(t testing.TB) *testUser {
	t.Helper()
	needRoot(t)
	testUserOnce.Do(func() {
		name := os.Getenv("SKILLRUN_TEST_USER")
		if name == "" {
			name = "skillrun-test"
		}
		if _, err := user.Lookup(name); err != nil {
			script := filepath.Join(repoRoot(), "hack", "ensure-test-user.sh")
			cmd := exec.Command(script)
			cmd.Env = append(os.Environ(), "SKILLRUN_TEST_USER="+name)
			if out, err := cmd.CombinedOutput(); err != nil {
				testUserErr = fmt.Errorf("test user %s missing and %s failed: %v: %s", name, script, err, out)
				return
			}
		}
		u, err := user.Lookup(name)
		if err != nil {
			testUserErr = err
			return
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		tu := &testUser{name: name, uid: uid, gid: gid, home: u.HomeDir, xdg: fmt.Sprintf("/run/user/%d", uid)}
		if _, err := os.Stat(tu.xdg); err != nil {
			testUserErr = fmt.Errorf("XDG_RUNTIME_DIR %s of %s: %v (run hack/ensure-test-user.sh)", tu.xdg, name, err)
			return
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			testUserErr = fmt.Errorf("runuser not found: %v", err)
			return
		}
		// The runtime binary must be executable by the user: a copy it
		// can reach when a parent folder of runtimeBin is closed to it.
		bin, err := stage.Exec(name, runtimeBin)
		if err != nil {
			testUserErr = err
			return
		}
		if out, err := exec.Command("runuser", "-u", name, "--", bin, "--version").CombinedOutput(); err != nil {
			testUserErr = fmt.Errorf("%s cannot run %s: %v: %s", name, bin, err, out)
			return
		}
		tu.bin = bin
		testUserVal = tu
	})
	if testUserErr != nil {
		t.Skipf("rootless test user unavailable: %v", testUserErr)
	}
	return testUserVal
}

func repoRoot() string {
	wd, _ := os.Getwd() // go test runs in the package directory, tests/
	return filepath.Dir(wd)
}

// ---------------------------------------------------------------- temp dirs

var nonIDChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// tempDir makes a 0755 directory under tmpBase removed (mounts first) when
// the test ends.
func tempDir(t testing.TB) string {
	t.Helper()
	requireSetup(t)
	name := nonIDChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	d, err := os.MkdirTemp(tmpBase, name+"-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if os.Getenv("KEEP_TEST_FILES") == "" {
			removeTree(d)
		}
	})
	return d
}

// removeTree lazily unmounts anything mounted under dir, deepest first, then
// removes it without crossing into other file systems.
func removeTree(dir string) {
	for _, m := range mountsUnder(dir) {
		_ = unix.Unmount(m, unix.MNT_DETACH)
	}
	if len(mountsUnder(dir)) > 0 {
		return // never rm -rf through a mount
	}
	_ = os.RemoveAll(dir)
}

// mountsUnder lists mount points in our mount namespace at or under dir,
// deepest first.
func mountsUnder(dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// uniqueID returns a fresh container ID that names the test.
func uniqueID(t testing.TB) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := nonIDChars.ReplaceAllString(t.Name(), "-")
	name = strings.ReplaceAll(name, "/", "-")
	if len(name) > 24 {
		name = name[len(name)-24:]
	}
	return strings.Trim(strings.ToLower(name), "-.") + "-" + hex.EncodeToString(b)
}

// ---------------------------------------------------------------- running the runtime

// rt runs the runtime under test with a fixed set of global flags, as root
// or as the test user.
type rt struct {
	t    testing.TB
	root string // --root; "" for the runtime's default
	user *testUser
	// globals are extra global flags placed before the verb (--log ...).
	globals []string
	// wrap runs the runtime under a command (nohup ...); root only.
	wrap []string
}

// newRT returns a runner with a private state root under a temp dir.
func newRT(t testing.TB) *rt {
	t.Helper()
	requireSetup(t)
	root := filepath.Join(tempDir(t), "state")
	return &rt{t: t, root: root}
}

// newRootlessRT returns a runner that runs the runtime as the test user with
// a private state root the user owns.
func newRootlessRT(t testing.TB) *rt {
	t.Helper()
	u := needTestUser(t)
	d := tempDir(t)
	if err := os.Chown(d, u.uid, u.gid); err != nil {
		t.Fatal(err)
	}
	return &rt{t: t, root: filepath.Join(d, "state"), user: u}
}

// result is one finished runtime invocation.
type result struct {
	argv     []string
	asUser   string
	code     int
	stdout   string
	stderr   string
	duration time.Duration
}

func (r result) String() string {
	who := "root"
	if r.asUser != "" {
		who = r.asUser
	}
	return fmt.Sprintf("command (as %s): %s\nexit code: %d (%s)\nstdout: %q\nstderr: %q",
		who, shellQuote(r.argv), r.code, r.duration.Round(time.Millisecond), r.stdout, r.stderr)
}

func shellQuote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$;&|<>*?()[]{}") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

// runOpts are the less common knobs of an invocation.
type runOpts struct {
	stdin io.Reader
	// stdout/stderr, when set, are handed to the runtime as they are (the
	// container inherits them after create); otherwise temp files are used.
	stdout, stderr *os.File
	extraFiles     []*os.File
	dir            string
	timeout        time.Duration
}

// argv builds the full command line for args.
func (r *rt) argv(args ...string) []string {
	a := append([]string(nil), r.wrap...)
	if r.user != nil {
		a = append(a, "runuser", "-u", r.user.name, "--", "env",
			"XDG_RUNTIME_DIR="+r.user.xdg, "HOME="+r.user.home, "USER="+r.user.name,
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	if r.user != nil {
		a = append(a, r.user.bin)
	} else {
		a = append(a, runtimeBin)
	}
	if r.root != "" {
		a = append(a, "--root", r.root)
	}
	a = append(a, r.globals...)
	return append(a, args...)
}

// command returns an unstarted command (for runs that must stay in the
// background).
func (r *rt) command(ctx context.Context, args ...string) *exec.Cmd {
	argv := r.argv(args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// exec runs the runtime to completion. stdout and stderr go to files, never
// pipes: after create the container holds them, and a pipe would block
// Wait until the container exits.
func (r *rt) exec(o runOpts, args ...string) result {
	r.t.Helper()
	if o.timeout == 0 {
		o.timeout = cmdTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	cmd := r.command(ctx, args...)
	cmd.Stdin = o.stdin
	cmd.ExtraFiles = o.extraFiles
	cmd.Dir = o.dir
	var outF, errF *os.File
	var err error
	if o.stdout != nil {
		cmd.Stdout = o.stdout
	} else {
		if outF, err = os.CreateTemp(tmpBase, "stdout-"); err != nil {
			r.t.Fatal(err)
		}
		defer os.Remove(outF.Name())
		defer outF.Close()
		cmd.Stdout = outF
	}
	if o.stderr != nil {
		cmd.Stderr = o.stderr
	} else {
		if errF, err = os.CreateTemp(tmpBase, "stderr-"); err != nil {
			r.t.Fatal(err)
		}
		defer os.Remove(errF.Name())
		defer errF.Close()
		cmd.Stderr = errF
	}
	start := time.Now()
	err = cmd.Run()
	res := result{argv: cmd.Args, code: 0, duration: time.Since(start)}
	if r.user != nil {
		res.asUser = r.user.name
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
		if ee.ExitCode() < 0 {
			res.code = -1
		}
	default:
		r.t.Fatalf("cannot run %s: %v", shellQuote(cmd.Args), err)
	}
	if ctx.Err() != nil {
		res.code = -1
		res.stderr = fmt.Sprintf("[timed out after %s] ", o.timeout)
	}
	if res.duration > 3*time.Second {
		r.t.Logf("slow runtime call (%s): %s", res.duration.Round(time.Millisecond), shellQuote(cmd.Args))
	}
	if outF != nil {
		b, _ := os.ReadFile(outF.Name())
		res.stdout = string(b)
	}
	if errF != nil {
		b, _ := os.ReadFile(errF.Name())
		res.stderr += string(b)
	}
	return res
}

func (r *rt) run(args ...string) result {
	r.t.Helper()
	return r.exec(runOpts{}, args...)
}

// ok runs and fails the test unless the exit code is 0.
func (r *rt) ok(args ...string) result {
	r.t.Helper()
	res := r.run(args...)
	if res.code != 0 {
		r.t.Fatalf("expected success\n%s", res)
	}
	return res
}

// fails runs and fails the test unless the exit code is 1 and stderr (or
// the --log file, which the caller checks) mentions want.
func (r *rt) fails(want string, args ...string) result {
	r.t.Helper()
	res := r.run(args...)
	expectFailure(r.t, res, want)
	return res
}

func expectFailure(t testing.TB, res result, want string) {
	t.Helper()
	if res.code != 1 && !(res.code == 255 && isExec(res.argv)) {
		t.Fatalf("expected exit code 1 with an error containing %q\n%s", want, res)
	}
	if want != "" && !strings.Contains(res.stderr, want) {
		t.Fatalf("expected stderr to contain %q\n%s", want, res)
	}
}

// ---------------------------------------------------------------- bundles

var (
	// Two: the rootless template needs the test user, which a root test
	// running first must not decide is missing.
	specOnce, specUnprivOnce sync.Once
	specRoot, specUnpriv     []byte
	specRootErr              error
	specUnprivErr            error
)

// specTemplate returns config.json as generated by `$RUNTIME spec` (root) or
// `$RUNTIME spec --rootless` run as the test user. Generated once.
func specTemplate(t testing.TB, u *testUser) []byte {
	t.Helper()
	specOnce.Do(func() {
		d, err := os.MkdirTemp(tmpBase, "spec-root-")
		if err == nil {
			out, err2 := exec.Command(runtimeBin, "spec", "--bundle", d).CombinedOutput()
			if err2 != nil {
				specRootErr = fmt.Errorf("%s spec --bundle %s: %v: %s", runtimeBin, d, err2, out)
			} else {
				specRoot, specRootErr = os.ReadFile(filepath.Join(d, "config.json"))
			}
		} else {
			specRootErr = err
		}
	})
	if u == nil {
		if specRootErr != nil {
			t.Fatalf("spec template: %v", specRootErr)
		}
		return specRoot
	}
	specUnprivOnce.Do(func() {
		if testUserVal == nil {
			specUnprivErr = errors.New("test user not set up")
			return
		}
		d, err := os.MkdirTemp(tmpBase, "spec-rootless-")
		if err != nil {
			specUnprivErr = err
			return
		}
		os.Chmod(d, 0o755)
		os.Chown(d, testUserVal.uid, testUserVal.gid)
		out, err := exec.Command("runuser", "-u", testUserVal.name, "--", testUserVal.bin, "spec", "--rootless", "--bundle", d).CombinedOutput()
		if err != nil {
			specUnprivErr = fmt.Errorf("as %s: %s spec --rootless --bundle %s: %v: %s", testUserVal.name, testUserVal.bin, d, err, out)
			return
		}
		specUnpriv, specUnprivErr = os.ReadFile(filepath.Join(d, "config.json"))
	})
	if specUnprivErr != nil {
		t.Fatalf("rootless spec template: %v", specUnprivErr)
	}
	return specUnpriv
}

// bundle is an OCI bundle in a temp dir with its own busybox rootfs.
type bundle struct {
	t    testing.TB
	dir  string
	spec *specs.Spec
	user *testUser
}

// newBundle makes a bundle whose process runs args (no terminal). For the
// test user the spec comes from `spec --rootless` and the bundle directory
// is owned by the user.
func newBundle(t testing.TB, u *testUser, args ...string) *bundle {
	t.Helper()
	if u != nil {
		needTestUser(t)
	}
	tmpl := specTemplate(t, u)
	dir := tempDir(t)
	if err := cloneRootfs(filepath.Join(dir, "rootfs")); err != nil {
		t.Fatalf("rootfs: %v", err)
	}
	var s specs.Spec
	if err := json.Unmarshal(tmpl, &s); err != nil {
		t.Fatalf("config.json generated by %s spec is not valid: %v", runtimeName, err)
	}
	if s.Process == nil || s.Root == nil || s.Linux == nil {
		t.Fatalf("config.json generated by %s spec lacks process, root or linux: %s", runtimeName, tmpl)
	}
	s.Process.Terminal = false
	s.Process.Args = args
	s.Hostname = "testhost"
	b := &bundle{t: t, dir: dir, spec: &s, user: u}
	if u != nil {
		if err := os.Chown(dir, u.uid, u.gid); err != nil {
			t.Fatal(err)
		}
	}
	b.save()
	return b
}

func (b *bundle) config() string { return filepath.Join(b.dir, "config.json") }
func (b *bundle) rootfs() string { return filepath.Join(b.dir, "rootfs") }

// save writes config.json.
func (b *bundle) save() {
	b.t.Helper()
	data, err := json.MarshalIndent(b.spec, "", "\t")
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(b.config(), data, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// ---------------------------------------------------------------- containers

// container is one container the test made; cleaned up when the test ends.
type container struct {
	t      testing.TB
	r      *rt
	id     string
	b      *bundle
	pid    int
	stdout string // file holding the container's stdout
	stderr string
	// cgroups are the host cgroup directories of the init, by controller.
	cgroups map[string]string
}

// track registers cleanup for id: kill, force delete, and as a last resort
// SIGKILL the recorded pid and remove its cgroups.
func (r *rt) track(c *container) {
	c.t.Cleanup(func() {
		r.exec(runOpts{timeout: 20 * time.Second}, "kill", c.id, "KILL")
		r.exec(runOpts{timeout: 20 * time.Second}, "delete", "--force", c.id)
		if c.pid > 1 && pidAlive(c.pid) && hostcheck.InOtherPidNS(c.pid) {
			_ = unix.Kill(c.pid, unix.SIGKILL)
			waitPidGone(c.pid, 5*time.Second)
		}
		dirs := make([]string, 0, len(c.cgroups))
		for _, d := range c.cgroups {
			dirs = append(dirs, d)
		}
		if len(dirs) == 0 && isRoot() && c.id != "" {
			dirs = hostcheck.CgroupDirsNamed(c.id) // never learned its pid: look
		}
		for _, d := range dirs {
			if filepath.Base(d) != c.id {
				continue // only ever touch a cgroup named after the container
			}
			hostcheck.RemoveCgroup(d)
		}
		if r.root != "" {
			_ = os.RemoveAll(filepath.Join(r.root, c.id))
		}
	})
}

// newContainer prepares a container record with stdout/stderr files the
// container will write to.
func (r *rt) newContainer(b *bundle, id string) *container {
	r.t.Helper()
	if id == "" {
		id = uniqueID(r.t)
	}
	c := &container{t: r.t, r: r, id: id, b: b,
		stdout: filepath.Join(b.dir, "ctr.stdout"), stderr: filepath.Join(b.dir, "ctr.stderr")}
	r.track(c)
	return c
}

func (c *container) openStdio() (out, errf *os.File) {
	c.t.Helper()
	out, err := os.OpenFile(c.stdout, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		c.t.Fatal(err)
	}
	errf, err = os.OpenFile(c.stderr, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.r.user != nil {
		os.Chown(c.stdout, c.r.user.uid, c.r.user.gid)
		os.Chown(c.stderr, c.r.user.uid, c.r.user.gid)
	}
	return out, errf
}

// create runs `create --bundle B [flags] ID` with the container's stdio
// going to files, and checks success and the created state.
func (r *rt) create(b *bundle, flags ...string) *container {
	r.t.Helper()
	c := r.newContainer(b, "")
	res := c.createRaw(runOpts{}, flags...)
	if res.code != 0 {
		r.t.Fatalf("create failed\n%s\ncontainer stderr: %s", res, c.output(c.stderr))
	}
	st := c.state()
	if st.Status != "created" {
		r.t.Fatalf("after create: status %q, want created (state %+v)", st.Status, st)
	}
	c.setPid(st.Pid)
	return c
}

func (c *container) createRaw(o runOpts, flags ...string) result {
	c.t.Helper()
	out, errf := c.openStdio()
	defer out.Close()
	defer errf.Close()
	o.stdout, o.stderr = out, errf
	args := append([]string{"create", "--bundle", c.b.dir}, flags...)
	res := c.r.exec(o, append(args, c.id)...)
	// the runtime's own messages went to the container's stdio files
	res.stdout, res.stderr = c.output(c.stdout), c.output(c.stderr)
	return res
}

func (c *container) setPid(pid int) {
	c.pid = pid
	if pid > 0 {
		c.cgroups = hostCgroups(pid)
	}
}

// run starts a container detached (create + start) and waits for running.
func (r *rt) start(b *bundle) *container {
	r.t.Helper()
	c := r.create(b)
	r.ok("start", c.id)
	c.waitStatus("running", 10*time.Second)
	return c
}

func (c *container) output(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// Stdout returns what the container wrote to stdout so far.
func (c *container) Stdout() string { return c.output(c.stdout) }

// waitStdout waits until the container's stdout contains want.
func (c *container) waitStdout(want string, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if strings.Contains(c.Stdout(), want) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("container %s: stdout never contained %q within %s; stdout %q stderr %q",
		c.id, want, timeout, c.Stdout(), c.output(c.stderr))
}

// ociState is `state` output.
type ociState struct {
	OCIVersion  string            `json:"ociVersion"`
	ID          string            `json:"id"`
	Pid         int               `json:"pid"`
	Status      string            `json:"status"`
	Bundle      string            `json:"bundle"`
	Rootfs      string            `json:"rootfs"`
	Created     time.Time         `json:"created"`
	Annotations map[string]string `json:"annotations"`
	Owner       string            `json:"owner"`
}

func (c *container) state() ociState {
	c.t.Helper()
	res := c.r.ok("state", c.id)
	var st ociState
	if err := json.Unmarshal([]byte(res.stdout), &st); err != nil {
		c.t.Fatalf("state output is not JSON: %v\n%s", err, res)
	}
	return st
}

// waitStatus polls state until status is want.
func (c *container) waitStatus(want string, timeout time.Duration) ociState {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var st ociState
	for {
		st = c.state()
		if st.Status == want || time.Now().After(deadline) {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if st.Status != want {
		c.t.Fatalf("container %s: status %q after %s, want %q", c.id, st.Status, timeout, want)
	}
	return st
}

// ---------------------------------------------------------------- host-side checks

// pidAlive says whether pid is a live (not zombie) process. Zombies that are
// our children (we are the subreaper) are reaped.
func pidAlive(pid int) bool {
	var ws unix.WaitStatus
	if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil && got == pid {
		return false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state != 'Z' && state != 'X'
}

func waitPidGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if !pidAlive(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hostCgroups maps each cgroup v1 controller (and "unified") of pid to its
// directory on the host, leaving out every cgroup the test process itself
// is in (a rootless container without cgroups shares ours).
func hostCgroups(pid int) map[string]string {
	m := rawCgroups(pid)
	for k, v := range rawCgroups(os.Getpid()) {
		if m[k] == v {
			delete(m, k)
		}
	}
	return m
}

func rawCgroups(pid int) map[string]string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[2] == "/" {
			continue
		}
		ctrl := parts[1]
		switch {
		case ctrl == "":
			ctrl = "unified"
		case strings.HasPrefix(ctrl, "name="):
			ctrl = strings.TrimPrefix(ctrl, "name=")
		}
		base := filepath.Join("/sys/fs/cgroup", ctrl)
		if ctrl == "unified" && parts[0] == "0" {
			// cgroup v2: mounted at /sys/fs/cgroup itself on a v2-only
			// host, at /sys/fs/cgroup/unified on a hybrid one.
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
				base = "/sys/fs/cgroup"
			}
		}
		for _, c := range strings.Split(ctrl, ",") {
			d := filepath.Join(base, parts[2])
			if _, err := os.Stat(d); err == nil {
				m[c] = d
			}
		}
	}
	return m
}

// assertNoTrace checks from the host that container id left nothing: no
// state dir, no live process, no cgroup dir, no mount referencing the
// bundle.
func assertNoTrace(t testing.TB, r *rt, id string, pid int, bundleDir string) {
	t.Helper()
	if r.root != "" && id != "" {
		if _, err := os.Lstat(filepath.Join(r.root, id)); err == nil {
			t.Errorf("state dir %s still exists", filepath.Join(r.root, id))
		}
		if left := rootLeftovers(r.root, id); len(left) > 0 {
			t.Errorf("root dir %s still holds %v for container %s", r.root, left, id)
		}
	}
	if pid > 0 && !waitPidGone(pid, 5*time.Second) {
		t.Errorf("container %s init pid %d still alive", id, pid)
	}
	if id == "" {
		// no usable name to look for
	} else if procs := waitNoProcsMentioning(id, 2*time.Second); len(procs) > 0 {
		// (A detached egress helper ends as its container's init does,
		// not before the runtime call returns: a moment's grace.)
		t.Errorf("processes still mention container %s: %v", id, procs)
	}
	if isRoot() && id != "" {
		if dirs := hostcheck.CgroupDirsNamed(id); len(dirs) > 0 {
			t.Errorf("cgroup dirs of container %s left behind: %v", id, dirs)
		}
	}
	if bundleDir != "" {
		data, _ := os.ReadFile("/proc/self/mountinfo")
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(unescapeMount(line), bundleDir) {
				t.Errorf("mount referencing bundle %s left behind: %s", bundleDir, line)
			}
		}
	}
}

// procsMentioning lists live processes holding one of the needles as a
// whole argument (see hostcheck.ProcsWithArg).
func procsMentioning(s string) []string {
	return hostcheck.ProcsWithArg([]string{s})
}

// waitNoProcsMentioning waits up to timeout for no process to mention s,
// and returns those that still do.
func waitNoProcsMentioning(s string, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		procs := procsMentioning(s)
		if len(procs) == 0 || time.Now().After(deadline) {
			return procs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readCgroupFile reads a cgroup control file of the container.
func (c *container) cgroupFile(controller, file string) string {
	c.t.Helper()
	d, ok := c.cgroups[controller]
	if !ok {
		c.t.Fatalf("container %s (pid %d) has no %s cgroup on the host (cgroups: %v)", c.id, c.pid, controller, c.cgroups)
	}
	data, err := os.ReadFile(filepath.Join(d, file))
	if err != nil {
		c.t.Fatalf("read %s: %v", filepath.Join(d, file), err)
	}
	return strings.TrimSpace(string(data))
}

// ---------------------------------------------------------------- logs

// logLine is one logrus JSON line.
type logLine map[string]any

// readJSONLog parses every line of a --log-format json file; a non-JSON
// line fails the test.
func readJSONLog(t testing.TB, path string) []logLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("log file: %v", err)
	}
	defer f.Close()
	var lines []logLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log %s: line is not JSON: %q", path, sc.Text())
		}
		lines = append(lines, l)
	}
	return lines
}

// assertErrorLogged checks the contract containerd relies on: the last line
// is {"level":"error","msg":...,"time":...} containing want, and that
// message is logged at error level exactly once.
func assertErrorLogged(t testing.TB, path, want string) string {
	t.Helper()
	lines := readJSONLog(t, path)
	if len(lines) == 0 {
		t.Fatalf("log %s is empty, want an error line containing %q", path, want)
	}
	last := lines[len(lines)-1]
	for _, k := range []string{"level", "msg", "time"} {
		if _, ok := last[k]; !ok {
			t.Errorf("last log line lacks %q: %v", k, last)
		}
	}
	if last["level"] != "error" {
		t.Errorf("last log line level = %v, want error: %v", last["level"], last)
	}
	msg, _ := last["msg"].(string)
	if !strings.Contains(msg, want) {
		t.Errorf("last log line msg %q does not contain %q (all lines: %v)", msg, want, lines)
	}
	if ts, _ := last["time"].(string); ts != "" {
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Errorf("log time %q is not RFC 3339: %v", ts, err)
		}
	}
	n := 0
	for _, l := range lines {
		if l["level"] == "error" && l["msg"] == msg {
			n++
		}
	}
	if n != 1 {
		t.Errorf("error %q logged %d times, want once: %v", msg, n, lines)
	}
	return msg
}

// isExec says whether argv is an exec call. runc exits 255, not 1, when exec
// itself fails (so that a failure can be told from the process's status);
// the suite accepts both for exec.
func isExec(argv []string) bool {
	for _, a := range argv {
		switch a {
		case "exec":
			return true
		case "create", "run", "start", "state", "kill", "delete", "pause", "resume", "ps", "events", "update", "list", "spec", "features":
			return false
		}
	}
	return false
}

func fileUID(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// rootLeftovers lists what a state root holds that a gone container could
// have left: any file, and anything named after id. Empty directories the
// runtime keeps for itself (skillrun's @locks) are allowed.
func rootLeftovers(root, id string) []string {
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		if !d.IsDir() || (id != "" && strings.Contains(d.Name(), id)) {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}
