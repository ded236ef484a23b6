//go:build !runtimeonly

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/runtime/fake"
)

// The tests of the verbs only skillrun-skills carries out (skill, sandbox,
// mcp): skillrun, built with the runtimeonly tag, execs it for them.

func TestTerminalSafe(t *testing.T) {
	for in, want := range map[string]string{
		"plain\ttext\nnext":   "plain\ttext\nnext",
		"\x1b]0;pwned\x07":    `\x1b]0;pwned\x07`,
		"bad \xff utf8":       "bad \uFFFD utf8",
		"\u009b31m csi":       `\x9b31m csi`,
		"ok: done\rskillrun:": `ok: done\x0dskillrun:`,
	} {
		if got := terminalSafe(in); got != want {
			t.Errorf("terminalSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWriteResultTextPartialLimits: rootless without cgroups some limits
// are enforced (memory by rlimit) and others not (cpus: nil).
func TestWriteResultTextPartialLimits(t *testing.T) {
	mem, pids := int64(64<<20), int64(32)
	res := &runner.Result{Skill: "s", Limits: &runner.Limits{MemoryBytes: &mem, Pids: &pids, NotEnforced: []string{"cpus"},
		Enforcement: &runner.Enforcement{Memory: runner.Enforced{Limit: float64(mem), EnforcedBy: "rlimit_as", Scope: runner.ScopeProcess}}}}
	var b strings.Builder
	if err := writeResult(&b, res, "text"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"memory=64.0 MiB/process", "pids=32", "(not enforced: cpus)"} {
		if !strings.Contains(out, want) {
			t.Errorf("text result lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "cpus=") {
		t.Errorf("text result shows an unenforced cpu quota:\n%s", out)
	}
}

// TestExecHelp: skill exec and sandbox describe themselves, and their
// usage errors exit 2 with one line.
func TestExecHelp(t *testing.T) {
	f := fake.New()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"skill", "exec", "--help"}, "skill exec [command options] DIR -- CMD [ARG...]"},
		{[]string{"sandbox", "--help"}, "sandbox [command options] [flags] -- CMD [ARG...]"},
	} {
		r := call(t, f, "", c.args...)
		if r.code != 0 || !strings.Contains(r.stdout, c.want) {
			t.Errorf("%v: %+v", c.args, r)
		}
	}
	for _, args := range [][]string{{"sandbox"}, {"skill", "exec", "x"}, {"skill", "exec", "--format", "yaml", "x", "--", "true"}, {"sandbox", "--format", "yaml", "--", "true"}} {
		r := call(t, f, "", args...)
		if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%v: want exit 2 and one line: %+v", args, r)
		}
	}
}

// TestSkillErrorLines: TestErrorLines for the skill verbs.
func TestSkillErrorLines(t *testing.T) {
	f := fake.New()
	calc := filepath.Join("..", "..", "examples", "skills", "calculator")
	bad := t.TempDir()
	sk := filepath.Join(bad, "demo")
	os.MkdirAll(sk, 0o755)
	os.WriteFile(filepath.Join(sk, "SKILL.md"), []byte("---\nname: demo\ndescription: d\n---\n"), 0o644)
	os.WriteFile(filepath.Join(sk, "sandbox.yaml"), []byte("limits:\n  memroy: 1G\n"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"skill", "run", "--input", `{"expression": 1`, calc}, 2, `skillrun: skill "calculator": input: not valid JSON: unexpected EOF`},
		{[]string{"skill", "run", "--bogus", calc}, 2, `skillrun: skill run: flag provided but not defined: -bogus (see skillrun skill run --help)`},
		{[]string{"skill", "run", "--memory", "lots", calc}, 2, `skillrun: --memory: invalid size "lots" (want e.g. 65536, 512Mi, 1G)`},
		{[]string{"skill", "run", sk}, 2, `skillrun: skill "` + sk + `": sandbox.yaml: line 2: limits.memroy: unknown key; the keys of limits are memory, cpus, pids, timeout, scratch, output (did you mean "memory"?)`},
		{[]string{"sandbox"}, 2, `skillrun: sandbox: no command: skillrun sandbox [flags] -- CMD [ARG...]`},
		{[]string{"skill", "exec", "--with", "http://x/y.whl", calc, "--", "true"}, 2, `skillrun: --with "http://x/y.whl": want a pip requirement such as name==1.2 (no URLs, paths or pip options), or npm:NAME@VERSION`},
	} {
		r := call(t, f, "", c.args...)
		if r.code != c.code || r.stderr != c.want+"\n" {
			t.Errorf("%v: exit %d, stderr %q\nwant exit %d, %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}
