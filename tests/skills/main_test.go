//go:build integration

// Package skills_test holds black-box integration tests of the
// `skillrun skill` verbs: every verb, every example skill, as root and as
// an unprivileged user (rootless), plus host-side proofs of the sandbox's
// claims. The binary comes from $SKILLRUN or ../../bin/skillrun.
package skills_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/skillrun/skillrun/tests/internal/hostcheck"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	binary    string
	repo      string
	binaryErr error
	// stage holds copies of what the rootless test user cannot reach
	// (the binary, examples/ and testdata/ of a checkout in a folder
	// closed to it).
	stage hostcheck.Stage
)

func TestMain(m *testing.M) {
	wd, _ := os.Getwd()
	repo = filepath.Clean(filepath.Join(wd, "..", ".."))
	binary, binaryErr = hostcheck.SkillrunBinary(repo)
	code := m.Run()
	stage.Remove()
	os.Exit(code)
}

// mode is who runs skillrun: root, or an unprivileged user (rootless).
type mode struct {
	name string
	user *user.User // nil: the test process' own user
	uid  int
	gid  int
	// tmp is the TMPDIR of the skillrun process (checked empty after
	// every run: nothing left behind).
	tmp string
	// bin is the skillrun binary and data the folder holding examples/
	// and tests/skills/testdata/, as the mode's user reaches them: the
	// checkout's, or copies when it sits in a folder closed to the user.
	bin, data string
}

// self is the mode of the test process' own user.
func self(name string) *mode {
	return &mode{name: name, uid: os.Geteuid(), gid: os.Getegid(), bin: binary, data: repo}
}

const testUserDefault = "skillrun-test"

// rootOnly returns the root mode for a test that only runs as root,
// skipping it with why otherwise.
func rootOnly(t *testing.T, why string) *mode {
	t.Helper()
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root" + why)
	}
	m := self("root")
	m.tmp = privateTmp(t, m)
	return m
}

// modes returns the modes to run: root when the suite runs as root, and
// the unprivileged user (created by hack/ensure-test-user.sh). A mode that
// cannot run is skipped with the reason, never passed silently.
func forEachMode(t *testing.T, fn func(t *testing.T, m *mode)) {
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	t.Run("root", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("skipped: the suite is not running as root")
		}
		m := self("root")
		m.tmp = privateTmp(t, m)
		fn(t, m)
	})
	t.Run("rootless", func(t *testing.T) {
		if os.Geteuid() != 0 {
			m := self("rootless")
			m.tmp = privateTmp(t, m)
			fn(t, m)
			return
		}
		name := os.Getenv("SKILLRUN_TEST_USER")
		if name == "" {
			name = testUserDefault
		}
		u, err := user.Lookup(name)
		if err != nil {
			t.Skipf("skipped: no user %s to run rootless as (create it with hack/ensure-test-user.sh)", name)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		m := &mode{name: "rootless", user: u, uid: uid, gid: gid}
		var err1, err2 error
		m.bin, err1 = stage.Exec(u.Username, binary)
		m.data, err2 = stage.Read(u.Username, repo, "examples", "tests/skills/testdata")
		if err := errors.Join(err1, err2); err != nil {
			t.Skipf("skipped: %s cannot reach the binary or the skills under test: %v", name, err)
		}
		m.tmp = privateTmp(t, m)
		fn(t, m)
	})
}

// privateTmp makes a TMPDIR for skillrun owned by the mode's user. As root
// it is 0711: the sandbox's host user (nobody or the skill's owner) must
// traverse it to reach the bundle, which skillrun keeps 0700.
func privateTmp(t *testing.T, m *mode) string {
	dir, err := os.MkdirTemp("", "skillrun-skills-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if m.user != nil {
		if err := os.Chown(dir, m.uid, m.gid); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ownedDir makes a folder writable by the sandbox of mode m: as root the
// sandbox maps to the folder's owner, so hand it to nobody.
func ownedDir(t *testing.T, m *mode) string {
	dir, err := os.MkdirTemp("", "skillrun-skills-ws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	uid, gid := m.uid, m.gid
	if m.user == nil && m.uid == 0 {
		uid, gid = 65534, 65534
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

type result struct {
	argv   []string
	stdout string
	stderr string
	code   int
}

func (r result) String() string {
	return fmt.Sprintf("$ skillrun %s\nexit %d\nstdout: %s\nstderr: %s", strings.Join(r.argv, " "), r.code, r.stdout, r.stderr)
}

// run runs skillrun with args as the mode's user, stdin from in.
func (m *mode) run(t *testing.T, in string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := m.commandContext(ctx, args...)
	cmd.Stdin = strings.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := result{argv: args, stdout: out.String(), stderr: errb.String(), code: cmd.ProcessState.ExitCode()}
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("run skillrun: %v", err)
	}
	return res
}

// commandContext is skillrun with args, run as the mode's user, its state root
// (root) under the mode's private TMPDIR.
func (m *mode) commandContext(ctx context.Context, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR=" + m.tmp, "SKILLRUN_CANARY=canary-7f3a9"}
	if m.user != nil {
		xdg := fmt.Sprintf("/run/user/%d", m.uid)
		full := append([]string{"-u", m.user.Username, "--", "env", "-i"}, env...)
		full = append(full, "HOME="+m.user.HomeDir, "XDG_RUNTIME_DIR="+xdg, m.bin)
		cmd = exec.CommandContext(ctx, "runuser", append(full, args...)...)
	} else {
		root := filepath.Join(m.tmp, "state")
		cmd = exec.CommandContext(ctx, m.bin, append([]string{"--root", root}, args...)...)
		cmd.Env = append(env, "HOME=/root")
		if os.Geteuid() != 0 {
			cmd.Env = append(env, "HOME="+os.Getenv("HOME"), "XDG_RUNTIME_DIR="+os.Getenv("XDG_RUNTIME_DIR"))
		}
	}
	return cmd
}

// skillResult is the JSON result of skill run.
type skillResult struct {
	OK            bool            `json:"ok"`
	Skill         string          `json:"skill"`
	ExitCode      int             `json:"exit_code"`
	Output        json.RawMessage `json:"output"`
	Stderr        string          `json:"stderr"`
	StoppedReason string          `json:"stopped_reason"`
	Error         string          `json:"error"`
	Usage         struct {
		WallMS          int64 `json:"wall_ms"`
		CPUMS           int64 `json:"cpu_ms"`
		PeakMemoryBytes int64 `json:"peak_memory_bytes"`
	} `json:"usage"`
	Limits *struct {
		Cgroups     bool     `json:"cgroups"`
		MemoryBytes *int64   `json:"memory_bytes"`
		Pids        *int64   `json:"pids"`
		TimeoutMS   int64    `json:"timeout_ms"`
		Network     string   `json:"network"`
		Workspace   bool     `json:"workspace"`
		NotEnforced []string `json:"not_enforced"`
		Enforcement map[string]struct {
			EnforcedBy string `json:"enforced_by"`
		} `json:"enforcement"`
	} `json:"limits"`
}

// skillRun runs `skill run` with the flags and input, checks the exit
// code and that stdout is exactly one JSON result, and that nothing was
// left in TMPDIR.
func (m *mode) skillRun(t *testing.T, wantCode int, dir, input string, flags ...string) (skillResult, result) {
	t.Helper()
	args := append([]string{"skill", "run"}, flags...)
	args = append(args, "--input", input, dir)
	res := m.run(t, "", args...)
	if res.code != wantCode {
		t.Fatalf("want exit %d\n%s", wantCode, res)
	}
	var r skillResult
	if wantCode != 2 && wantCode != 1 {
		dec := json.NewDecoder(strings.NewReader(res.stdout))
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("stdout is not a JSON result: %v\n%s", err, res)
		}
		if dec.More() {
			t.Fatalf("stdout has more than one JSON document\n%s", res)
		}
		checkLimitWarnings(t, r, res)
	}
	m.assertClean(t)
	return r, res
}

// notAppliedRE finds the runtime's warning about limits it dropped (no
// cgroups): "limits not applied: memory, cpu, pids".
var notAppliedRE = regexp.MustCompile(`limits not applied: ([A-Za-z]+(?:, [A-Za-z]+)*)`)

// checkLimitWarnings fails when stderr warns that a limit was not
// applied while the result's limits say it is enforced (rootless without
// cgroups: memory by rlimit_as, pids by rlimit_nproc): the result is the
// report, and a warning contradicting it misleads.
func checkLimitWarnings(t *testing.T, r skillResult, res result) {
	t.Helper()
	if r.Limits == nil {
		return
	}
	for _, m := range notAppliedRE.FindAllStringSubmatch(res.stderr, -1) {
		for _, name := range strings.Split(m[1], ", ") {
			key := name
			if key == "cpu" {
				key = "cpus" // the runtime's resource name; the result's limit
			}
			if by := r.Limits.Enforcement[key].EnforcedBy; by != "" && by != "none" {
				t.Errorf("stderr says limit %q was not applied, the result says it is enforced by %s\n%s", name, by, res)
			}
		}
	}
}

// assertClean checks that skillrun left no bundle behind in TMPDIR, no
// container in the state root, and no mount below TMPDIR in the host's
// mount table (assertNoHostLeftovers also checks cgroups by container ID).
func (m *mode) assertClean(t *testing.T) {
	t.Helper()
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, l := range strings.Split(string(mi), "\n") {
			if strings.Contains(l, m.tmp) {
				t.Errorf("mount left behind: %s", l)
			}
		}
	}
	ents, _ := os.ReadDir(m.tmp)
	for _, e := range ents {
		if e.Name() != "state" {
			t.Errorf("left behind in TMPDIR: %s", e.Name())
		}
	}
	// The runtime keeps its lock folder (@locks) in the state root; any
	// other entry, or a lock file, is a container left behind.
	ents, _ = os.ReadDir(filepath.Join(m.tmp, "state"))
	for _, e := range ents {
		if e.Name() != "@locks" {
			t.Errorf("container state left behind: %s", e.Name())
		}
	}
	if locks, _ := os.ReadDir(filepath.Join(m.tmp, "state", "@locks")); len(locks) != 0 {
		t.Errorf("container lock left behind: %s", locks[0].Name())
	}
}

// example is the example skill name, probe the probe skill, as the mode's
// user reaches them.
func (m *mode) example(name string) string { return filepath.Join(m.data, "examples", "skills", name) }
func (m *mode) probe() string              { return filepath.Join(m.data, "tests", "skills", "testdata", "probe") }
