//go:build integration

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// skillrun is the OCI runtime alone; skill, sandbox and mcp are carried out
// by skillrun-skills, installed beside it, which the runtime execs before
// its own Go runtime starts (cmd/skillrun/delegate_linux.go), and which
// serves a bundle's network allowlist.

// TestCompanionExecBeforeGo: `skillrun [global flags] skill ...` is
// carried out by skillrun-skills, and only one Go runtime starts (that of
// skillrun-skills: GODEBUG=inittrace=1 prints one line for each Go
// runtime's own init). With skillrun's Go runtime started first, two
// would.
func TestCompanionExecBeforeGo(t *testing.T) {
	if !info().skillrun {
		t.Skipf("skipped: the companion binaries are skillrun's (runtime %s)", runtimeName)
	}
	if _, err := os.Stat(runtimeBin + "-skills"); err != nil {
		t.Fatalf("no skillrun-skills beside %s (make static builds it): %v", runtimeBin, err)
	}
	calc := filepath.Join(repoRoot(), "examples", "skills", "calculator")
	root := filepath.Join(tempDir(t), "state")
	for _, args := range [][]string{
		{"skill", "inspect", calc},
		{"--root", root, "--log-format=json", "--debug", "skill", "inspect", calc},
	} {
		cmd := exec.Command(runtimeBin, args...)
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), "calculator") {
			t.Fatalf("%v: %v\n%s\n%s", args, err, out, stderr.String())
		}
		if n := strings.Count(stderr.String(), "init runtime @"); n != 1 {
			t.Errorf("%v: %d Go runtimes started, want 1 (skillrun-skills' alone)\n%s", args, n, stderr.String())
		}
	}
	// help VERB and VERB --help of a companion's verb are the companion's.
	for _, args := range [][]string{{"help", "skill"}, {"skill", "--help"}, {"help", "mcp"}} {
		out, err := exec.Command(runtimeBin, args...).Output()
		want, werr := exec.Command(runtimeBin+"-skills", args...).Output()
		if err != nil || werr != nil || string(out) != string(want) || !strings.Contains(string(out), "NAME:") {
			t.Errorf("%v: %v (%v), want skillrun-skills' help:\n%s\nwant:\n%s", args, err, werr, out, want)
		}
	}
}

// copyRuntime copies the runtime under test, alone, into dir as
// skillrun, and returns the copy's path.
func copyRuntime(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "skillrun")
	data, err := os.ReadFile(runtimeBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestCompanionMissing: a skillrun installed without skillrun-skills says
// so in one line naming it (exit 1) for the skill verbs, and refuses a
// bundle that asks for a network allowlist, which skillrun-skills serves,
// leaving no state, process, cgroup or mount behind; other bundles run.
func TestCompanionMissing(t *testing.T) {
	needRoot(t)
	if !info().skillrun {
		t.Skipf("skipped: the companion binaries are skillrun's (runtime %s)", runtimeName)
	}
	bin := copyRuntime(t, tempDir(t))
	r := &rt{t: t, root: filepath.Join(tempDir(t), "state")}
	run := func(args ...string) (int, string) {
		cmd := exec.Command(bin, append([]string{"--root", r.root}, args...)...)
		// Nothing in PATH either: the runtime alone.
		cmd.Env = append(os.Environ(), "PATH="+t.TempDir())
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	for _, args := range [][]string{{"skill", "run", "x"}, {"sandbox", "--", "true"}, {"mcp", "serve", "x"}} {
		code, out := run(args...)
		if code != 1 || !strings.Contains(out, "skillrun-skills") || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Errorf("%v without skillrun-skills: exit %d, want 1 and one line naming it:\n%s", args, code, out)
		}
	}
	b := newBundle(t, nil, "true")
	if !slices.ContainsFunc(b.spec.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.NetworkNamespace }) {
		b.spec.Linux.Namespaces = append(b.spec.Linux.Namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	}
	b.spec.Annotations = map[string]string{"run.skillrun.network.allow": "api.test:80"}
	b.save()
	id := uniqueID(t)
	code, out := run("run", "--bundle", b.dir, id)
	if code != 1 || !strings.Contains(out, "run.skillrun.network.allow") || !strings.Contains(out, "skillrun-skills") {
		t.Errorf("an allowlist bundle without skillrun-skills: exit %d, want 1 naming the annotation and the binary:\n%s", code, out)
	}
	assertNoTrace(t, r, id, 0, b.dir)
	delete(b.spec.Annotations, "run.skillrun.network.allow")
	b.save()
	if code, out := run("run", "--bundle", b.dir, uniqueID(t)); code != 0 {
		t.Errorf("a plain bundle without skillrun-skills: exit %d\n%s", code, out)
	}
}
