//go:build integration

package hostile_test

import (
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
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cmdTimeout bounds every invocation: a hung skillrun fails its test.
const cmdTimeout = 60 * time.Second

// ---------------------------------------------------------------- modes

// mode is who runs skillrun: root, or the unprivileged test user.
type mode struct {
	name string
	user *user.User // nil: root (the test process itself)
	uid  int
	gid  int
	home string
	// dir is this test's private folder (owned by the mode's user): its
	// path never appears in another test's processes or mounts.
	dir string
	// root is the --root state folder, tmp the TMPDIR of skillrun.
	root, tmp string
	// bin is the skillrun binary and examples the folder holding the
	// example skills, as the mode's user reaches them (copies when the
	// checkout is in a folder closed to the test user).
	bin, examples string
}

func (m *mode) rootless() bool { return m.user != nil }

var (
	testUserOnce sync.Once
	testUser     *user.User
	testUserErr  error
	// userBin and userExamples are the binary and the example skills'
	// folder as the test user reaches them.
	userBin, userExamples string
)

// lookupTestUser finds (or, as root, creates with
// hack/ensure-test-user.sh) the unprivileged user.
func lookupTestUser() (*user.User, error) {
	testUserOnce.Do(func() {
		name := os.Getenv("SKILLRUN_TEST_USER")
		if name == "" {
			name = "skillrun-test"
		}
		if _, err := user.Lookup(name); err != nil {
			script := filepath.Join(repo, "hack", "ensure-test-user.sh")
			cmd := exec.Command(script)
			cmd.Env = append(os.Environ(), "SKILLRUN_TEST_USER="+name)
			if out, err := cmd.CombinedOutput(); err != nil {
				testUserErr = fmt.Errorf("user %s missing and %s failed: %v: %s", name, script, err, out)
				return
			}
		}
		u, err := user.Lookup(name)
		if err != nil {
			testUserErr = err
			return
		}
		if _, err := os.Stat("/run/user/" + u.Uid); err != nil {
			testUserErr = fmt.Errorf("XDG_RUNTIME_DIR of %s: %v (run hack/ensure-test-user.sh)", name, err)
			return
		}
		// Copies it can reach when a parent folder of the checkout is
		// closed to the user.
		bin, err := stage.Exec(name, binary)
		if err != nil {
			testUserErr = err
			return
		}
		data, err := stage.Read(name, repo, "examples/skills")
		if err != nil {
			testUserErr = err
			return
		}
		if out, err := exec.Command("runuser", "-u", name, "--", bin, "--version").CombinedOutput(); err != nil {
			testUserErr = fmt.Errorf("%s cannot run %s: %v: %s", name, bin, err, out)
			return
		}
		userBin, userExamples = bin, filepath.Join(data, "examples", "skills")
		testUser = u
	})
	return testUser, testUserErr
}

// forEachMode runs fn as root and as the test user, each in a subtest. A
// mode that cannot run is skipped with the reason, never passed.
func forEachMode(t *testing.T, fn func(t *testing.T, m *mode)) {
	requireSetup(t)
	t.Run("root", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("skipped: the suite is not running as root")
		}
		fn(t, newMode(t, nil))
	})
	t.Run("rootless", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("skipped: the suite must run as root to run skillrun as the test user (runuser)")
		}
		u, err := lookupTestUser()
		if err != nil {
			t.Skipf("skipped: rootless test user unavailable: %v", err)
		}
		fn(t, newMode(t, u))
	})
}

// rootMode returns the root mode, or skips.
func rootMode(t *testing.T) *mode {
	requireSetup(t)
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root")
	}
	return newMode(t, nil)
}

var nonName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func newMode(t *testing.T, u *user.User) *mode {
	t.Helper()
	m := &mode{name: "root", user: u, bin: binary, examples: filepath.Join(repo, "examples", "skills")}
	if u != nil {
		m.name = "rootless"
		m.bin, m.examples = userBin, userExamples
		m.uid, _ = strconv.Atoi(u.Uid)
		m.gid, _ = strconv.Atoi(u.Gid)
		m.home = u.HomeDir
	}
	name := nonName.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	d, err := os.MkdirTemp(tmpBase, name+"-")
	if err != nil {
		t.Fatal(err)
	}
	m.dir = d
	// As root the sandbox's host user (nobody) must traverse every parent
	// of TMPDIR and of the skill folders.
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if os.Getenv("KEEP_TEST_FILES") == "" {
			removeTree(d)
		}
	})
	m.root = filepath.Join(d, "state")
	m.tmp = filepath.Join(d, "tmp")
	m.mkdir(t, "tmp")
	// As root the sandbox's host user (nobody or the skill's owner) must
	// traverse TMPDIR to reach the bundle, which skillrun keeps 0700.
	if err := os.Chmod(m.tmp, 0o711); err != nil {
		t.Fatal(err)
	}
	m.chown(t, d)
	return m
}

// mkdir makes rel under the mode's folder, owned by the mode's user.
func (m *mode) mkdir(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(m.dir, rel)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	m.chown(t, p)
	return p
}

func (m *mode) chown(t testing.TB, p string) {
	t.Helper()
	if m.user == nil {
		return
	}
	if err := os.Lchown(p, m.uid, m.gid); err != nil {
		t.Fatal(err)
	}
}

// chownTree gives a folder tree to the mode's user.
func (m *mode) chownTree(t testing.TB, dir string) {
	t.Helper()
	if m.user == nil {
		return
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			_ = os.Lchown(p, m.uid, m.gid)
		}
		return nil
	})
}

// ---------------------------------------------------------------- running

// result is one finished invocation.
type result struct {
	argv     []string
	who      string
	code     int
	stdout   string
	stderr   string
	duration time.Duration
}

func (r result) String() string {
	argv := make([]string, len(r.argv))
	for i, a := range r.argv {
		if len(a) > 200 {
			a = a[:200] + fmt.Sprintf("...(%d bytes)", len(a))
		}
		argv[i] = strconv.Quote(a)
	}
	return fmt.Sprintf("command (as %s): %s\nexit code: %d (%s)\nstdout: %s\nstderr: %s",
		r.who, strings.Join(argv, " "), r.code, r.duration.Round(time.Millisecond), clip(r.stdout), clip(r.stderr))
}

func clip(s string) string {
	if len(s) > 2000 {
		return strconv.Quote(s[:2000]) + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return strconv.Quote(s)
}

// opts are the less common knobs of an invocation.
type opts struct {
	stdin   io.Reader
	dir     string
	timeout time.Duration
	// noRoot leaves out --root (the skill verbs that do not run
	// anything do not need it, and it checks the default).
	noRoot bool
	// noTmpdir leaves TMPDIR unset (skillrun then uses /dev/shm).
	noTmpdir bool
}

// command builds the command line for args, as the mode's user.
func (m *mode) command(ctx context.Context, o opts, args ...string) *exec.Cmd {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	if !o.noTmpdir {
		env = append(env, "TMPDIR="+m.tmp)
	}
	full := []string{m.bin}
	if !o.noRoot {
		full = append(full, "--root", m.root)
	}
	full = append(full, args...)
	var cmd *exec.Cmd
	if m.user != nil {
		pre := append([]string{"-u", m.user.Username, "--", "env", "-i"}, env...)
		pre = append(pre, "HOME="+m.home, "USER="+m.user.Username, "XDG_RUNTIME_DIR=/run/user/"+m.user.Uid)
		cmd = exec.CommandContext(ctx, "runuser", append(pre, full...)...)
	} else {
		cmd = exec.CommandContext(ctx, full[0], full[1:]...)
		cmd.Env = append(env, "HOME=/root")
	}
	cmd.Dir = o.dir
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// run runs skillrun to completion. stdout and stderr go to files, not
// pipes: after create the container holds them.
func (m *mode) run(t testing.TB, o opts, args ...string) result {
	t.Helper()
	if o.timeout == 0 {
		o.timeout = cmdTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	cmd := m.command(ctx, o, args...)
	cmd.Stdin = o.stdin
	outF, err := os.CreateTemp(tmpBase, "stdout-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(outF.Name())
	defer outF.Close()
	errF, err := os.CreateTemp(tmpBase, "stderr-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(errF.Name())
	defer errF.Close()
	cmd.Stdout, cmd.Stderr = outF, errF
	start := time.Now()
	err = cmd.Run()
	res := result{argv: args, who: m.name, duration: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case errors.Is(err, exec.ErrWaitDelay):
	default:
		t.Fatalf("cannot run skillrun %q: %v", args, err)
	}
	b, _ := os.ReadFile(outF.Name())
	res.stdout = string(b)
	b, _ = os.ReadFile(errF.Name())
	res.stderr = string(b)
	if ctx.Err() != nil {
		res.code = -1
		res.stderr = fmt.Sprintf("[timed out after %s] ", o.timeout) + res.stderr
	}
	return res
}

// errorLines returns stderr's lines that are not warnings.
func errorLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.TrimSpace(l) == "" || strings.Contains(l, "level=warning") || strings.HasPrefix(l, "skillrun: warning: ") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// wantError checks the contract of a refused invocation: exit code code,
// nothing on stdout (unless allowStdout), exactly one error line on
// stderr, which contains every want (the field or file it names).
func wantError(t testing.TB, res result, code int, want ...string) {
	t.Helper()
	if res.code != code {
		t.Errorf("want exit code %d\n%s", code, res)
		return
	}
	if res.stdout != "" {
		t.Errorf("an error must print nothing on stdout\n%s", res)
	}
	lines := errorLines(res.stderr)
	if len(lines) != 1 {
		t.Errorf("want exactly one error line on stderr, got %d\n%s", len(lines), res)
		return
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Errorf("error line does not contain %q\n%s", w, res)
		}
	}
	if strings.Contains(res.stderr, "panic") || strings.Contains(res.stderr, "goroutine ") {
		t.Errorf("skillrun panicked\n%s", res)
	}
}

// ---------------------------------------------------------------- host-side checks

// assertClean checks from the host that nothing of the mode's runs is
// left: no container state under the state root (the empty @locks folder
// is allowed), nothing in TMPDIR, no live process whose command line names
// the mode's folder or one of ids, no mount under the mode's folder or
// naming an id, no cgroup folder named after an id, no bundle folder of
// the named skills in /dev/shm. Processes get a few seconds to go.
func (m *mode) assertClean(t testing.TB, ids []string, skills ...string) {
	t.Helper()
	for _, p := range m.leftovers(ids, skills, 5*time.Second) {
		t.Errorf("left behind (%s): %s", m.name, p)
	}
}

func (m *mode) leftovers(ids, skills []string, wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		left := m.scan(ids, skills)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (m *mode) scan(ids, skills []string) []string {
	var left []string
	if ents, err := os.ReadDir(m.root); err == nil {
		for _, e := range ents {
			if e.Name() == "@locks" {
				locks, _ := os.ReadDir(filepath.Join(m.root, e.Name()))
				for _, l := range locks {
					left = append(left, "state lock "+filepath.Join(m.root, "@locks", l.Name()))
				}
				continue
			}
			left = append(left, "state "+filepath.Join(m.root, e.Name()))
		}
	}
	if ents, err := os.ReadDir(m.tmp); err == nil {
		for _, e := range ents {
			left = append(left, "TMPDIR entry "+filepath.Join(m.tmp, e.Name()))
		}
	}
	needles := append([]string{m.dir}, ids...)
	for _, p := range procsMentioning(needles) {
		left = append(left, "process "+p)
	}
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 {
				continue
			}
			mp := unescapeMount(f[4])
			for _, n := range needles {
				if strings.Contains(mp, n) {
					left = append(left, "mount "+line)
					break
				}
			}
		}
	}
	for _, id := range ids {
		for _, d := range hostcheck.CgroupDirsNamed(id) {
			left = append(left, "cgroup "+d)
		}
	}
	for _, s := range skills {
		matches, _ := filepath.Glob(filepath.Join("/dev/shm", "skillrun-"+s+"-*"))
		for _, p := range matches {
			left = append(left, "bundle folder "+p)
		}
	}
	return left
}

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// procsMentioning lists live processes holding one of the needles as a
// whole argument (see hostcheck.ProcsWithArg).
func procsMentioning(needles []string) []string {
	return hostcheck.ProcsWithArg(needles)
}

// pidAlive says whether pid is a live, not zombie, process.
func pidAlive(pid int) bool { return hostcheck.Alive(pid) }

// removeTree lazily unmounts anything under dir, deepest first, then
// removes it without crossing into other file systems.
func removeTree(dir string) {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	var mps []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 {
			if mp := unescapeMount(f[4]); mp == dir || strings.HasPrefix(mp, dir+"/") {
				mps = append(mps, mp)
			}
		}
	}
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	for _, mp := range mps {
		_ = unix.Unmount(mp, unix.MNT_DETACH)
	}
	if len(mps) > 0 {
		return // never rm -rf through a mount
	}
	_ = os.RemoveAll(dir)
}

// ---------------------------------------------------------------- containers

// uniqueID returns a fresh, valid container ID naming the test.
func uniqueID(t testing.TB) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := strings.ToLower(nonName.ReplaceAllString(t.Name(), "-"))
	if len(name) > 24 {
		name = name[len(name)-24:]
	}
	return strings.Trim(name, "-.") + "-" + hex.EncodeToString(b)
}

var (
	specMu   sync.Mutex
	specTmpl = map[string][]byte{}
)

// specTemplate is config.json as `skillrun spec` writes it (with
// --rootless for the test user).
func (m *mode) specTemplate(t testing.TB) map[string]any {
	t.Helper()
	specMu.Lock()
	defer specMu.Unlock()
	data, ok := specTmpl[m.name]
	if !ok {
		d := m.mkdir(t, "spec-template")
		args := []string{"spec", "--bundle", d}
		if m.rootless() {
			args = append(args, "--rootless")
		}
		res := m.run(t, opts{noRoot: true}, args...)
		if res.code != 0 {
			t.Fatalf("spec template\n%s", res)
		}
		var err error
		if data, err = os.ReadFile(filepath.Join(d, "config.json")); err != nil {
			t.Fatal(err)
		}
		specTmpl[m.name] = data
	}
	var s map[string]any
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// newBundle makes a bundle with a busybox rootfs whose process runs args,
// owned by the mode's user. edit, when not nil, changes the config.
func (m *mode) newBundle(t testing.TB, name string, edit func(s map[string]any), args ...string) string {
	t.Helper()
	dir := m.mkdir(t, name)
	if err := cloneRootfs(filepath.Join(dir, "rootfs")); err != nil {
		t.Fatal(err)
	}
	s := m.specTemplate(t)
	p := s["process"].(map[string]any)
	p["terminal"] = false
	p["args"] = args
	if edit != nil {
		edit(s)
	}
	data, err := json.MarshalIndent(s, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	m.writeFile(t, filepath.Join(dir, "config.json"), data)
	m.chownTree(t, dir)
	return dir
}

func (m *mode) writeFile(t testing.TB, p string, data []byte) {
	t.Helper()
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m.chown(t, p)
}

// track registers cleanup of container id: kill, force delete.
func (m *mode) track(t testing.TB, id string) {
	t.Cleanup(func() {
		m.run(t, opts{timeout: 20 * time.Second}, "kill", id, "KILL")
		m.run(t, opts{timeout: 20 * time.Second}, "delete", "--force", id)
	})
}

// state returns `state ID` decoded, failing the test on error.
func (m *mode) state(t testing.TB, id string) map[string]any {
	t.Helper()
	res := m.run(t, opts{}, "state", id)
	if res.code != 0 {
		t.Fatalf("state\n%s", res)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &st); err != nil {
		t.Fatalf("state is not JSON: %v\n%s", err, res)
	}
	return st
}

func (m *mode) waitStatus(t testing.TB, id, want string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := m.state(t, id)
		if st["status"] == want {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s: status %v, want %s", id, st["status"], want)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// ---------------------------------------------------------------- skills

// skill writes a skill folder named name under the mode's folder with
// files (path -> content; a path ending in "*" is made executable), owned
// by the mode's user.
func (m *mode) skill(t testing.TB, parent, name string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(m.mkdir(t, parent), name)
	for p, c := range files {
		perm := os.FileMode(0o644)
		if strings.HasSuffix(p, "*") {
			p, perm = strings.TrimSuffix(p, "*"), 0o755
		}
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), perm); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m.chownTree(t, filepath.Dir(dir))
	return dir
}

// skillMD is a valid SKILL.md for name.
func skillMD(name string) string {
	return "---\nname: " + name + "\ndescription: A hostile-input test skill.\n---\n# " + name + "\n"
}

// uniqueSkill returns a valid, unique skill name (its bundle folders in
// /dev/shm are then recognisable).
func uniqueSkill(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

func example(name string) string { return filepath.Join(repo, "examples", "skills", name) }

// example is the example skill name as the mode's user reaches it.
func (m *mode) example(name string) string { return filepath.Join(m.examples, name) }

// skillResult is the JSON result of skill run.
type skillResult struct {
	OK            bool            `json:"ok"`
	Skill         string          `json:"skill"`
	ExitCode      int             `json:"exit_code"`
	Output        json.RawMessage `json:"output"`
	Stderr        string          `json:"stderr"`
	StoppedReason string          `json:"stopped_reason"`
	Error         string          `json:"error"`
}

// decodeResult checks that stdout is exactly one JSON result.
func decodeResult(t testing.TB, res result) skillResult {
	t.Helper()
	var r skillResult
	dec := json.NewDecoder(strings.NewReader(res.stdout))
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("stdout is not a JSON result: %v\n%s", err, res)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON document\n%s", res)
	}
	return r
}
