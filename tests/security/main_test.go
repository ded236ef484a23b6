//go:build integration

// Package security_test is skillrun's containment suite: every probe is a
// real skill (Python, or shell) that tries to escape or to read what it
// must not, run with the default policy through `skillrun skill run`, as
// root and as an unprivileged user (rootless). The verdict always comes
// from the host side: a canary's content never appears in any output and
// its atime did not move, a file the skill tried to create outside scratch
// does not exist, a listener the test opened recorded no connection, a
// process the test started got no signal, the host mount table has no
// mount of the probe, and so on. After every run the test checks that no
// process, mount, cgroup, state folder or bundle of that run remains.
//
// Each probe writes its verdict as a JSON line to $SKILLRUN_SECURITY_REPORT
// when it is set (hack/security-report.sh turns them into docs/security.md).
// The binary comes from $SKILLRUN, default <repo>/bin/skillrun.
package security_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skillrun/skillrun/tests/internal/hostcheck"
)

var (
	binary    string
	repo      string
	binaryErr error
	// stage holds a copy of the binary for the rootless test user when
	// the checkout sits in a folder closed to it.
	stage     hostcheck.Stage
	hostPidNS string
	// envCanary and hostCanary are set in the caller's environment and as
	// the caller's hostname (in a private UTS namespace) on every run; no
	// output may ever contain them.
	envCanary  = "envcanary" + randHex(8)
	hostCanary = "hostcanary" + randHex(6)
)

func TestMain(m *testing.M) {
	wd, _ := os.Getwd()
	repo = filepath.Clean(filepath.Join(wd, "..", ".."))
	binary, binaryErr = hostcheck.SkillrunBinary(repo)
	hostPidNS, _ = os.Readlink("/proc/self/ns/pid")
	code := m.Run()
	stage.Remove()
	os.Exit(code)
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// ---------------------------------------------------------------------
// Verdicts

// P is a probe's *testing.T for one mode; it remembers the first failure
// or skip message for the machine-readable report.
type P struct {
	*testing.T
	id, mode string
	mu       sync.Mutex
	reason   string
}

func (p *P) note(s string) {
	p.mu.Lock()
	if p.reason == "" {
		p.reason = s
	}
	p.mu.Unlock()
}

// Errorf records and reports a failure.
func (p *P) Errorf(format string, args ...any) {
	p.T.Helper()
	p.note(fmt.Sprintf(format, args...))
	p.T.Errorf(format, args...)
}

// Fatalf records and reports a failure and stops the probe.
func (p *P) Fatalf(format string, args ...any) {
	p.T.Helper()
	p.note(fmt.Sprintf(format, args...))
	p.T.Fatalf(format, args...)
}

// Skipf records the reason and skips the probe.
func (p *P) Skipf(format string, args ...any) {
	p.T.Helper()
	p.note(fmt.Sprintf(format, args...))
	p.T.Skipf(format, args...)
}

var reportMu sync.Mutex

type verdict struct {
	Probe   string `json:"probe"`
	Mode    string `json:"mode"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
}

func (p *P) record() {
	v := verdict{Probe: p.id, Mode: p.mode, Verdict: "pass"}
	switch {
	case p.Skipped():
		v.Verdict = "skip"
	case p.Failed():
		v.Verdict = "fail"
	}
	if v.Verdict != "pass" {
		v.Reason = firstLine(p.reason)
		if v.Reason == "" {
			v.Reason = "see the test log"
		}
	}
	path := os.Getenv("SKILLRUN_SECURITY_REPORT")
	if path == "" {
		return
	}
	b, _ := json.Marshal(v)
	reportMu.Lock()
	defer reportMu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		p.T.Errorf("security report: %v", err)
		return
	}
	defer f.Close()
	f.Write(append(b, '\n'))
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// ---------------------------------------------------------------------
// Modes

// mode is who runs skillrun: root, or the unprivileged test user.
type mode struct {
	name      string
	user      *user.User // nil for root
	uid, gid  int        // the caller of skillrun
	home      string     // the caller's HOME
	stateRoot string     // the runtime's default state root for the caller
	// bin is the skillrun binary as the caller reaches it: binary, or a
	// copy when the checkout sits in a folder closed to the test user.
	bin string
}

const testUserDefault = "skillrun-test"

// probe runs fn as root and as the test user, in parallel subtests named
// root and rootless, and records each verdict under id.
func probe(t *testing.T, id string, fn func(p *P, m *mode)) {
	t.Parallel()
	for _, name := range []string{"root", "rootless"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := &P{T: t, id: id, mode: name}
			t.Cleanup(p.record)
			if binaryErr != nil {
				p.Fatalf("%v", binaryErr)
			}
			if os.Geteuid() != 0 {
				p.Skipf("skipped: the suite must run as root (it creates canaries in /etc and runs the rootless mode as %s)", testUserDefault)
			}
			m := &mode{name: name, home: "/root", stateRoot: "/run/skillrun", bin: binary}
			if name == "rootless" {
				uname := os.Getenv("SKILLRUN_TEST_USER")
				if uname == "" {
					uname = testUserDefault
				}
				u, err := user.Lookup(uname)
				if err != nil {
					p.Skipf("skipped: no user %s to run rootless as (create it with hack/ensure-test-user.sh)", uname)
				}
				m.user = u
				m.uid, _ = strconv.Atoi(u.Uid)
				m.gid, _ = strconv.Atoi(u.Gid)
				m.home = u.HomeDir
				m.stateRoot = filepath.Join(m.xdg(), "skillrun")
				if fi, err := os.Stat(m.xdg()); err != nil || !fi.IsDir() {
					p.Skipf("skipped: %s has no XDG_RUNTIME_DIR %s", uname, m.xdg())
				}
				if m.bin, err = stage.Exec(uname, binary); err != nil {
					p.Skipf("skipped: %s cannot reach the binary under test: %v", uname, err)
				}
			}
			fn(p, m)
		})
	}
}

func (m *mode) rootless() bool { return m.user != nil }
func (m *mode) xdg() string    { return fmt.Sprintf("/run/user/%d", m.uid) }

// ---------------------------------------------------------------------
// Skills

// skill is a probe skill written into a fresh temp folder.
type skill struct {
	base  string // the temp folder holding the skill (and other fixtures)
	dir   string // the skill folder
	name  string
	token string // unique; in the skill's argv, so its processes can be found
	uid   int    // the host uid the sandbox runs as
}

var uidSeq atomic.Int64

// sandboxUID is a host uid nobody else uses: as root the sandbox maps to
// the skill folder's owner, so its processes can be counted exactly.
func sandboxUID() int {
	n, _ := rand.Int(rand.Reader, big.NewInt(100000))
	return 1_700_000_000 + int(n.Int64())*100 + int(uidSeq.Add(1)%100)
}

// newSkill writes SKILL.md, the files (relative paths; "*.sh" and
// "scripts/*" executable) and a sandbox.yaml with the token in args plus
// manifest (extra YAML, e.g. limits) into a new folder.
func newSkill(p *P, m *mode, short string, files map[string]string, manifest string) *skill {
	p.Helper()
	base, err := os.MkdirTemp("", "skillrun-sec-")
	if err != nil {
		p.Fatalf("%v", err)
	}
	p.Cleanup(func() {
		if os.Getenv("KEEP_TEST_FILES") == "" {
			os.RemoveAll(base)
		}
	})
	os.Chmod(base, 0o755)
	sk := &skill{base: base, token: "tok" + randHex(8)}
	sk.name = fmt.Sprintf("sec-%s-%s-%s", short, m.name, randHex(3))
	sk.dir = filepath.Join(base, sk.name)
	files["SKILL.md"] = fmt.Sprintf("---\nname: %s\ndescription: Containment probe %s of tests/security; tries to escape the sandbox.\n---\n\n# %s\n\nA hostile probe. Never run it outside the sandbox.\n", sk.name, p.id, p.id)
	files["sandbox.yaml"] = fmt.Sprintf("args: [%q]\n%s", sk.token, manifest)
	for rel, content := range files {
		path := filepath.Join(sk.dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			p.Fatalf("%v", err)
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(rel, "scripts/") {
			mode = 0o755
		}
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			p.Fatalf("%v", err)
		}
	}
	sk.uid = m.uid
	if !m.rootless() {
		sk.uid = sandboxUID()
		filepath.WalkDir(sk.dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil {
				os.Lchown(path, sk.uid, sk.uid)
			}
			return nil
		})
	}
	return sk
}

// pyProbe is a Python skill: the prelude plus body.
func pyProbe(p *P, m *mode, short, body, manifest string) *skill {
	return newSkill(p, m, short, map[string]string{"scripts/main.py": pyPrelude + body}, manifest)
}

// pyPrelude gives every Python probe: REQ (the input), OUT (the report),
// sc() (a raw syscall returning 0 or the errno), attempt() (run a function,
// record "ok", its value or "errno N"), done() (print OUT as JSON).
const pyPrelude = `import ctypes, errno, json, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
REQ = json.load(sys.stdin)
OUT = {}
def _arg(a):
    if a is None: return ctypes.c_void_p(0)
    if isinstance(a, int): return ctypes.c_long(a)
    if isinstance(a, bytes): return ctypes.c_char_p(a)
    return a
def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[_arg(a) for a in args])
    return 0 if r >= 0 else ctypes.get_errno()
def scv(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[_arg(a) for a in args])
    return r if r >= 0 else -ctypes.get_errno()
def attempt(key, fn):
    try:
        v = fn()
        OUT[key] = "ok" if v is None else v
    except OSError as e:
        OUT[key] = "errno %d" % (e.errno or 0)
    except Exception as e:
        OUT[key] = "error %s: %s" % (type(e).__name__, e)
def done():
    sys.stdout.write(json.dumps(OUT, default=str))
    sys.stdout.flush()
`

// ---------------------------------------------------------------------
// Running

// runOpts are the knobs of one skillrun call.
type runOpts struct {
	input      string
	flags      []string
	env        []string   // extra caller environment
	extraFiles []*os.File // inherited by skillrun as fd 3...
	cwd        string     // skillrun's working directory
	tty        *os.File   // stdin/stdout/stderr and controlling terminal
	args       []string   // raw skillrun args instead of "skill run ... DIR"
	timeout    time.Duration
	during     func() // called while skillrun runs (in a goroutine)
	tmp        string // TMPDIR to use (default: a fresh one)
	// killed: the test kills skillrun on purpose; what it leaves is
	// checked after the clean-up (a later run in the same tmp), not here.
	killed bool
}

// outcome is one skillrun call and its parsed result.
type outcome struct {
	argv           []string
	stdout, stderr string
	code           int
	res            skillResult
	parsed         bool
	tmp            string
}

func (o *outcome) String() string {
	return fmt.Sprintf("$ skillrun %s\nexit %d\nstdout: %s\nstderr: %s", strings.Join(o.argv, " "), o.code, clip(o.stdout), clip(o.stderr))
}

func clip(s string) string {
	if len(s) > 4000 {
		return s[:4000] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}

// all is everything the skill could have said: stdout and stderr of
// skillrun (the result JSON holds the skill's output and stderr).
func (o *outcome) all() string { return o.stdout + "\n" + o.stderr }

type skillResult struct {
	OK            bool            `json:"ok"`
	ExitCode      int             `json:"exit_code"`
	Output        json.RawMessage `json:"output"`
	Stderr        string          `json:"stderr"`
	StoppedReason string          `json:"stopped_reason"`
	Error         string          `json:"error"`
	Usage         struct {
		WallMS int64 `json:"wall_ms"`
	} `json:"usage"`
	Limits *struct {
		Cgroups      bool     `json:"cgroups"`
		MemoryBytes  *int64   `json:"memory_bytes"`
		Pids         *int64   `json:"pids"`
		TimeoutMS    int64    `json:"timeout_ms"`
		OutputBytes  int64    `json:"output_bytes"`
		ScratchBytes int64    `json:"scratch_bytes"`
		Network      string   `json:"network"`
		NotEnforced  []string `json:"not_enforced"`
		Enforcement  map[string]struct {
			Limit      float64 `json:"limit"`
			EnforcedBy string  `json:"enforced_by"`
			Scope      string  `json:"scope"`
		} `json:"enforcement"`
	} `json:"limits"`
	Warnings []string `json:"warnings"`
}

// out decodes the skill's output object.
func (o *outcome) out(p *P) map[string]any {
	p.Helper()
	var v map[string]any
	if !o.parsed || json.Unmarshal(o.res.Output, &v) != nil || v == nil {
		p.Fatalf("the probe did not report (it must run to prove anything)\n%s", o)
	}
	return v
}

// str is a key of the skill's output as a string.
func str(v map[string]any, k string) string {
	switch x := v[k].(type) {
	case string:
		return x
	case nil:
		return "<missing>"
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// run runs skillrun as the mode's caller: `skill run [flags] --input IN
// DIR`, in a private UTS namespace whose hostname is hostCanary, with
// envCanary in the environment and a private TMPDIR. It then checks that
// no output holds a canary and that nothing of the run is left behind.
func (m *mode) run(p *P, sk *skill, o runOpts) *outcome {
	p.Helper()
	tmp := o.tmp
	if tmp == "" {
		tmp = m.tempDir(p)
	}
	args := o.args
	if args == nil {
		args = append([]string{"skill", "run"}, o.flags...)
		if o.input == "" {
			o.input = "{}"
		}
		args = append(args, "--input", o.input, sk.dir)
	}
	timeout := o.timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := m.command(ctx, tmp, o.env, args...)
	cmd.Dir = o.cwd
	cmd.ExtraFiles = o.extraFiles
	var stdout, stderr bytes.Buffer
	if o.tty != nil {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = o.tty, o.tty, o.tty
		cmd.SysProcAttr = ttyAttr()
	} else {
		cmd.Stdin = strings.NewReader("{}")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
	}
	if err := cmd.Start(); err != nil {
		p.Fatalf("start skillrun: %v", err)
	}
	var wg sync.WaitGroup
	if o.during != nil {
		wg.Add(1)
		go func() { defer wg.Done(); o.during() }()
	}
	cmd.Wait()
	wg.Wait()
	if ctx.Err() != nil {
		p.Errorf("skillrun did not return within %v", timeout)
	}
	out := &outcome{argv: args, stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode(), tmp: tmp}
	if o.args == nil && o.tty == nil {
		dec := json.NewDecoder(strings.NewReader(out.stdout))
		if dec.Decode(&out.res) == nil {
			out.parsed = true
		}
	}
	p.Logf("%s", out)
	for _, c := range []string{envCanary, hostCanary} {
		if strings.Contains(out.all(), c) {
			p.Errorf("LEAK: the caller's canary %q (environment or hostname) appears in the output\n%s", c, out)
		}
	}
	if !o.killed {
		m.assertNoLeftovers(p, sk, tmp)
	}
	return out
}

// command is skillrun with args as the mode's caller (not started), in a
// private UTS namespace whose hostname is hostCanary, with envCanary and
// env in the environment and tmp as TMPDIR.
func (m *mode) command(ctx context.Context, tmp string, env []string, args ...string) *exec.Cmd {
	full := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"TMPDIR=" + tmp, "HOME=" + m.home,
		"SKILLRUN_SECRET=" + envCanary, "AWS_SECRET_ACCESS_KEY=" + envCanary, "GITHUB_TOKEN=" + envCanary, "LANG_CANARY=" + envCanary,
	}
	full = append(full, env...)
	if m.rootless() {
		full = append(full, "XDG_RUNTIME_DIR="+m.xdg())
	}
	inner := []string{m.bin}
	if m.rootless() {
		inner = append([]string{"runuser", "-u", m.user.Username, "--", "env", "-i"}, full...)
		inner = append(inner, m.bin)
	}
	inner = append(inner, args...)
	cmd := exec.CommandContext(ctx, "unshare", append([]string{"--uts", "--", "sh", "-c", `hostname "$0" && exec "$@"`, hostCanary}, inner...)...)
	cmd.Env = full
	return cmd
}

// tempDir makes a TMPDIR for a skillrun call of the mode's caller.
func (m *mode) tempDir(p *P) string {
	p.Helper()
	tmp, err := os.MkdirTemp("", "skillrun-sec-tmp-")
	if err != nil {
		p.Fatalf("%v", err)
	}
	p.Cleanup(func() { os.RemoveAll(tmp) })
	os.Chmod(tmp, 0o711)
	if m.rootless() {
		os.Chown(tmp, m.uid, m.gid)
	}
	return tmp
}

// skill runs the probe skill with input and flags.
func (m *mode) skill(p *P, sk *skill, input string, flags ...string) *outcome {
	p.Helper()
	return m.run(p, sk, runOpts{input: input, flags: flags})
}

// wantCode fails the probe unless skillrun exited with code.
func (o *outcome) wantCode(p *P, code int) {
	p.Helper()
	if o.code != code {
		p.Fatalf("skillrun exited %d, want %d\n%s", o.code, code, o)
	}
}

// ---------------------------------------------------------------------
// Host-side observations

// procInfo is what the host sees of a process.
type procInfo struct {
	pid, ppid  int
	ruid, euid int
	state      string
	pidns      string
	cmdline    string
}

// scanProcs reads every process of the host.
func scanProcs() []procInfo {
	ents, _ := os.ReadDir("/proc")
	var ps []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		pi, ok := readProc(pid)
		if ok {
			ps = append(ps, pi)
		}
	}
	return ps
}

func readProc(pid int) (procInfo, bool) {
	pi := procInfo{pid: pid, ruid: -1, euid: -1}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return pi, false
	}
	for _, line := range strings.Split(string(st), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "Uid:":
			pi.ruid, _ = strconv.Atoi(f[1])
			pi.euid, _ = strconv.Atoi(f[2])
		case len(f) >= 2 && f[0] == "State:":
			pi.state = f[1]
		case len(f) >= 2 && f[0] == "PPid:":
			pi.ppid, _ = strconv.Atoi(f[1])
		}
	}
	pi.pidns, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	pi.cmdline = strings.ReplaceAll(string(cl), "\x00", " ")
	return pi, true
}

// sandboxProcs are the host's processes of the run: those whose command
// line holds the token and their descendants, and as root (where the
// sandbox has a host uid of its own) every process of that uid in another
// pid namespace.
func sandboxProcs(sk *skill, m *mode) []procInfo {
	all := scanProcs()
	in := map[int]bool{}
	for _, pi := range all {
		if strings.Contains(pi.cmdline, sk.token) || (!m.rootless() && pi.ruid == sk.uid && pi.pidns != hostPidNS && pi.pidns != "") {
			in[pi.pid] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for _, pi := range all {
			if !in[pi.pid] && in[pi.ppid] && pi.pidns != hostPidNS {
				in[pi.pid], changed = true, true
			}
		}
	}
	var out []procInfo
	for _, pi := range all {
		if in[pi.pid] {
			out = append(out, pi)
		}
	}
	return out
}

// sampler watches the sandbox's processes from the host while a skill
// runs: the peak count, elevated effective uids, and a callback per look.
type sampler struct {
	stop     chan struct{}
	done     chan struct{}
	peak     int
	looks    int
	elevated []procInfo
	seen     map[int]procInfo
}

func startSampler(sk *skill, m *mode, each func([]procInfo)) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{}), seen: map[int]procInfo{}}
	go func() {
		defer close(s.done)
		for {
			ps := sandboxProcs(sk, m)
			s.looks++
			if len(ps) > s.peak {
				s.peak = len(ps)
			}
			for _, pi := range ps {
				if pi.euid != pi.ruid || pi.euid == 0 {
					s.elevated = append(s.elevated, pi)
				}
				s.seen[pi.pid] = pi
			}
			if each != nil {
				each(ps)
			}
			select {
			case <-s.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *sampler) Stop() { close(s.stop); <-s.done }

// assertNoLeftovers checks, after a run, that no process, mount, cgroup,
// state folder or bundle of it remains.
func (m *mode) assertNoLeftovers(p *P, sk *skill, tmp string) {
	p.Helper()
	var left []procInfo
	for deadline := time.Now().Add(5 * time.Second); ; {
		left = sandboxProcs(sk, m)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, pi := range left {
		p.Errorf("LEFTOVER process %d (uid %d, %s): %s", pi.pid, pi.ruid, pi.state, pi.cmdline)
		if pi.pidns != hostPidNS {
			exec.Command("kill", "-9", strconv.Itoa(pi.pid)).Run()
		}
	}
	for _, mi := range []string{"/proc/self/mountinfo", "/proc/1/mountinfo"} {
		b, _ := os.ReadFile(mi)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, sk.base) || strings.Contains(line, tmp) || strings.Contains(line, sk.token) {
				p.Errorf("LEFTOVER mount in %s: %s", mi, line)
			}
		}
	}
	for _, c := range findCgroups("skill-" + sk.name + "-") {
		p.Errorf("LEFTOVER cgroup %s", c)
	}
	for _, dir := range []string{m.stateRoot, filepath.Join(m.stateRoot, "@locks")} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.Contains(e.Name(), sk.name) {
				p.Errorf("LEFTOVER state %s", filepath.Join(dir, e.Name()))
			}
		}
	}
	ents, _ := os.ReadDir(tmp)
	for _, e := range ents {
		p.Errorf("LEFTOVER in TMPDIR: %s", filepath.Join(tmp, e.Name()))
	}
}

// findCgroups lists cgroup folders (up to 5 levels deep) whose name holds
// substr.
func findCgroups(substr string) []string {
	var found []string
	root := "/sys/fs/cgroup"
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.Count(strings.TrimPrefix(path, root), "/") > 5 {
			return filepath.SkipDir
		}
		if strings.Contains(d.Name(), substr) {
			found = append(found, path)
			return filepath.SkipDir
		}
		return nil
	})
	return found
}

// canary is a secret file on the host.
type canary struct {
	path, secret string
	atime        time.Time
}

// plantCanary writes a secret file owned by uid with perm, and sets its
// atime before its mtime so that any read moves it (relatime).
func plantCanary(p *P, path string, uid, gid int, perm os.FileMode) *canary {
	p.Helper()
	c := &canary{path: path, secret: "SECRET-" + randHex(12)}
	if err := os.WriteFile(path, []byte(c.secret+"\n"), perm); err != nil {
		p.Fatalf("plant canary: %v", err)
	}
	p.Cleanup(func() { os.Remove(path) })
	os.Chown(path, uid, gid)
	os.Chmod(path, perm)
	now := time.Now()
	c.atime = now.Add(-2 * time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, c.atime, now); err != nil {
		p.Fatalf("%v", err)
	}
	return c
}

// assertUntouched checks that the canary's content is in no output and
// that it was neither read (atime) nor changed.
func (c *canary) assertUntouched(p *P, outs ...*outcome) {
	p.Helper()
	for _, o := range outs {
		if strings.Contains(o.all(), c.secret) {
			p.Errorf("LEAK: the content of %s appears in the output\n%s", c.path, o)
		}
	}
	// atime first: the test's own read below moves it.
	if at := atime(c.path); !at.Equal(c.atime) {
		p.Errorf("LEAK: the canary %s was read: its atime moved from %v to %v", c.path, c.atime, at)
	}
	b, err := os.ReadFile(c.path)
	if err != nil || string(b) != c.secret+"\n" {
		p.Errorf("the canary %s changed: %q %v", c.path, b, err)
	}
}

func readLines(path string) []string {
	b, _ := os.ReadFile(path)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// mustJSON encodes v for a skill input.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
