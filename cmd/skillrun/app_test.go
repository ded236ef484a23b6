package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/fake"
)

type result struct {
	code           int
	stdout, stderr string
}

// call runs the app in-process against the fake runtime.
func call(t *testing.T, f *fake.Runtime, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{
		stdin:   strings.NewReader(stdin),
		stdout:  &out,
		stderr:  &errb,
		backend: func(runtime.Options) (runtime.Runtime, error) { return f, nil },
		// A companion binary is never exec'd in-process (companion_test.go
		// records it).
		execve: func(path string, _, _ []string) error { return errors.New("test: exec " + path) },
	}
	code := e.run(append([]string{"skillrun"}, args...))
	return result{code, out.String(), errb.String()}
}

func testBundle(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s := specs.Spec{Version: specs.Version, Root: &specs.Root{Path: "rootfs"}, Process: &specs.Process{Cwd: "/", Args: []string{"sh"}}, Linux: &specs.Linux{}}
	data, _ := json.Marshal(s)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLifecycleThroughCLI(t *testing.T) {
	f := fake.New()
	b := testBundle(t)
	if r := call(t, f, "", "create", "--bundle", b, "c1"); r.code != 0 || r.stdout != "" {
		t.Fatalf("create: %+v", r)
	}
	r := call(t, f, "", "state", "c1")
	var st map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("state is not JSON: %q", r.stdout)
	}
	for _, k := range []string{"ociVersion", "id", "pid", "status", "bundle", "rootfs", "created", "owner"} {
		if _, ok := st[k]; !ok {
			t.Errorf("state lacks key %q: %s", k, r.stdout)
		}
	}
	if st["status"] != "created" {
		t.Fatalf("status = %v", st["status"])
	}
	if r := call(t, f, "", "start", "c1"); r.code != 0 {
		t.Fatalf("start: %+v", r)
	}
	r = call(t, f, "", "ps", "--format", "json", "c1")
	var pids []int
	if err := json.Unmarshal([]byte(r.stdout), &pids); err != nil || len(pids) != 1 {
		t.Fatalf("ps json = %q", r.stdout)
	}
	r = call(t, f, "", "list", "--format", "json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || list[0]["id"] != "c1" {
		t.Fatalf("list json = %q", r.stdout)
	}
	if r := call(t, f, "", "list", "-q"); r.stdout != "c1\n" {
		t.Fatalf("list -q = %q", r.stdout)
	}
	if r := call(t, f, "", "list"); !strings.HasPrefix(r.stdout, "ID") || !strings.Contains(r.stdout, "running") {
		t.Fatalf("list table = %q", r.stdout)
	}
	if r := call(t, f, "", "update", "--resources", "-", "c1"); r.code == 0 {
		t.Fatalf("update with empty stdin succeeded: %+v", r)
	}
	if r := call(t, f, `{"pids":{"limit":7}}`, "update", "--resources", "-", "c1"); r.code != 0 || *f.Resources("c1").Pids.Limit != 7 {
		t.Fatalf("update: %+v", r)
	}
	if r := call(t, f, "", "update", "--memory", "64m", "c1"); r.code != 0 || *f.Resources("c1").Memory.Limit != 64<<20 {
		t.Fatalf("update --memory: %+v", r)
	}
	if r := call(t, f, "", "kill", "c1", "HUP"); r.code != 0 {
		t.Fatalf("kill HUP: %+v", r)
	}
	if r := call(t, f, "", "kill", "c1", "9"); r.code != 0 {
		t.Fatalf("kill 9: %+v", r)
	}
	if got := f.Signals("c1"); len(got) != 2 || got[0] != syscall.SIGHUP || got[1] != syscall.SIGKILL {
		t.Fatalf("signals = %v", got)
	}
	if r := call(t, f, "", "delete", "c1"); r.code != 0 {
		t.Fatalf("delete: %+v", r)
	}
	r = call(t, f, "", "delete", "c1")
	if r.code != 1 || !strings.Contains(r.stderr, "container does not exist") {
		t.Fatalf("second delete: %+v", r)
	}
}

func TestErrorsAreLoggedOnceAsJSON(t *testing.T) {
	f := fake.New()
	log := filepath.Join(t.TempDir(), "log.json")
	r := call(t, f, "", "--log", log, "--log-format", "json", "state", "missing")
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("state missing: %+v", r)
	}
	if !strings.Contains(r.stderr, "container does not exist") {
		t.Fatalf("stderr lacks the error: %q", r.stderr)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	n := 0
	var last map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		if m["level"] == "error" {
			n++
			last = m
		}
	}
	if n != 1 || last["msg"] != "container does not exist" || last["time"] == nil {
		t.Fatalf("want exactly one error line with the message, got %d: %s", n, data)
	}
}

func TestRunExitCodesAndBundleArgument(t *testing.T) {
	f := fake.New()
	f.ExitStatus = 137
	b := testBundle(t)
	if r := call(t, f, "", "run", b); r.code != 137 || r.stderr != "" {
		t.Fatalf("run BUNDLE exiting 137: %+v", r)
	}
	if len(f.Calls) == 0 || !strings.HasPrefix(f.Calls[0], "create skillrun-") {
		t.Fatalf("run BUNDLE did not generate an ID: %v", f.Calls)
	}
	f.ExitStatus = 0
	if r := call(t, f, "", "run", "-b", b, "named"); r.code != 0 {
		t.Fatalf("run -b: %+v", r)
	}
	if r := call(t, f, "", "run", "--keep", "-b", b, "kept"); r.code != 0 || !strings.Contains(call(t, f, "", "state", "kept").stdout, `"stopped"`) {
		t.Fatalf("run --keep: %+v", r)
	}
}

func TestUsageErrors(t *testing.T) {
	f := fake.New()
	for _, args := range [][]string{
		{"start"},
		{"state", "a", "b"},
		{"kill", "c1", "NOSUCH"},
		{"kill", "c1", "0"},
		{"--log-format", "xml", "list"},
		{"--rootless", "maybe", "list"},
		{"list", "--format", "yaml"},
		{"create", "--bundle", "/nonexistent", "x"},
		{"update", "--memory", "lots", "x"},
	} {
		r := call(t, f, "", args...)
		if r.code != 1 || r.stdout != "" || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%v: want exit 1, empty stdout and a one-line error; got %+v", args, r)
		}
	}
}

func TestSubCgroupPaths(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want map[string]string
		err  string
	}{
		{nil, nil, ""},
		{[]string{"sub"}, map[string]string{"": "sub"}, ""},
		{[]string{"cpu,cpuacct:a", "memory:b"}, map[string]string{"cpu": "a", "cpuacct": "a", "memory": "b"}, ""},
		{[]string{"a", "b"}, nil, "invalid --cgroup argument: a (missing <controller>: prefix)"},
		{[]string{"a:b:c"}, nil, "invalid --cgroup argument: a:b:c"},
		{[]string{",cpu:a"}, nil, "invalid --cgroup argument: ,cpu:a (empty <controller> prefix)"},
		{[]string{"cpu:a", "cpu:b"}, nil, "invalid --cgroup argument(s): controller cpu specified multiple times"},
	} {
		got, err := subCgroupPaths(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("subCgroupPaths(%q) error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("subCgroupPaths(%q) = %v, %v, want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"TERM": syscall.SIGTERM, "SIGTERM": syscall.SIGTERM, "term": syscall.SIGTERM, "15": syscall.SIGTERM, "KILL": syscall.SIGKILL, "9": syscall.SIGKILL, "0": 0} {
		got, err := parseSignal(in)
		if err != nil || got != want {
			t.Errorf("parseSignal(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "NOPE", "-1", "65", "SIG"} {
		if _, err := parseSignal(in); err == nil {
			t.Errorf("parseSignal(%q) succeeded", in)
		}
	}
}

func TestReorderArgs(t *testing.T) {
	e := &env{}
	app := e.newApp()
	for _, tc := range []struct{ in, want string }{
		{"skillrun skill bundle DIR -o B", "skillrun skill bundle -o B DIR"},
		{"skillrun --root /r skill run DIR --input {} --network=host --format text", "skillrun --root /r skill run --input {} --network=host --format text DIR"},
		{"skillrun skill run --timeout 1s DIR", "skillrun skill run --timeout 1s DIR"},
		{"skillrun skill run DIR -- --input", "skillrun skill run DIR -- --input"},
		{"skillrun exec c1 sh -c --input", "skillrun exec c1 sh -c --input"},
		{"skillrun --debug run -b B id", "skillrun --debug run -b B id"},
		{"skillrun update c1 --cpu-period 900000", "skillrun update --cpu-period 900000 c1"},
		{"skillrun --root /r delete c1 --force", "skillrun --root /r delete --force c1"},
		{"skillrun kill c1 0 -a", "skillrun kill -a c1 0"},
		{"skillrun kill c1 -9", "skillrun kill c1 -9"},
		{"skillrun create c1 --bundle B --pid-file=P", "skillrun create --bundle B --pid-file=P c1"},
		{"skillrun state c1 --help", "skillrun state --help"},
		{"skillrun delete c1 -- --force", "skillrun delete c1 -- --force"},
		{"skillrun exec c1 ls -l --cwd /", "skillrun exec c1 ls -l --cwd /"},
		{"skillrun ps c1 -ef --format json", "skillrun ps c1 -ef --format json"},
		{"skillrun nosuch c1 --force", "skillrun nosuch c1 --force"},
		// skill exec: the command's own flags stay the command's.
		{"skillrun skill exec DIR python3 x.py --timeout 5", "skillrun skill exec DIR python3 x.py --timeout 5"},
		{"skillrun skill exec DIR --timeout 5s -- python3 x.py --cwd a", "skillrun skill exec --timeout 5s DIR -- python3 x.py --cwd a"},
		{"skillrun sandbox --network host -- curl --memory x", "skillrun sandbox --network host -- curl --memory x"},
		{"skillrun skill bundle DIR -o B -- sh -c x", "skillrun skill bundle -o B DIR -- sh -c x"},
	} {
		if len(app.Command("skill").Subcommands) == 0 && strings.Contains(tc.in, " skill ") {
			// skill has no subcommands here (runtimeonly): skillrun-skills
			// reorders.
			tc.want = tc.in
		}
		got := strings.Join(reorderArgs(app, strings.Fields(tc.in)), " ")
		if got != tc.want {
			t.Errorf("reorder(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// twoDefaults matches a help line that names a default twice.
var twoDefaults = regexp.MustCompile(`(?i)default:.*default:`)

// TestEveryVerbHelp: every verb's and subcommand's --help (and `help
// VERB`) prints that verb's own help and exits 0, no flag naming its
// default twice; an unknown verb exits 1.

func TestEveryVerbHelp(t *testing.T) {
	// No companion binary found: a delegated verb's --help is its own.
	t.Setenv("PATH", t.TempDir())
	f := fake.New()
	e := &env{}
	var walk func(prefix []string, cmds []*cli.Command)
	n := 0
	walk = func(prefix []string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden || c.Name == "help" {
				continue
			}
			path := append(append([]string(nil), prefix...), c.Name)
			n++
			r := call(t, f, "", append(path, "--help")...)
			want := "skillrun " + strings.Join(path, " ") + " - "
			if r.code != 0 || !strings.Contains(r.stdout, want) {
				t.Errorf("%v --help: exit %d, want %q in\n%s", path, r.code, want, r.stdout)
			}
			// One default per flag: "(default: X) (default: Y)", or a
			// usage that says "default: ..." before urfave's own
			// "(default: false)", is two.
			for _, line := range strings.Split(r.stdout, "\n") {
				if twoDefaults.MatchString(line) {
					t.Errorf("%v --help: a flag says its default twice: %s", path, strings.TrimSpace(line))
				}
			}
			// sandbox has no skill: no /skill, no sandbox.yaml, no
			// manifest defaults (skill exec, sharing its flags, has them).
			switch strings.Join(path, " ") {
			case "sandbox":
				for _, no := range []string{`/skill\b`, `sandbox\.yaml`, `manifest`, `the skill`} {
					if regexp.MustCompile(no).MatchString(r.stdout) {
						t.Errorf("sandbox --help mentions %q, which does not apply to it:\n%s", no, r.stdout)
					}
				}
			case "skill exec":
				if !strings.Contains(r.stdout, "inside /workspace or /skill") || !strings.Contains(r.stdout, "the hosts sandbox.yaml declares") {
					t.Errorf("skill exec --help lost its own words:\n%s", r.stdout)
				}
			}
			walk(path, c.Subcommands)
		}
	}
	walk(nil, e.newApp().Commands)
	for _, line := range strings.Split(call(t, f, "", "--help").stdout, "\n") {
		if twoDefaults.MatchString(line) {
			t.Errorf("--help: a global flag says its default twice: %s", strings.TrimSpace(line))
		}
	}
	if n < 19 {
		t.Fatalf("only %d verbs walked", n)
	}
	if r := call(t, f, "", "help", "kill"); r.code != 0 || !strings.Contains(r.stdout, "skillrun kill - ") {
		t.Errorf("help kill: %+v", r)
	}
	for _, args := range [][]string{{"nosuch"}, {"nosuch", "-h"}} {
		if r := call(t, f, "", args...); r.code != 1 || !strings.Contains(r.stderr, `no such command "nosuch"`) {
			t.Errorf("%v: %+v", args, r)
		}
	}
}

// TestErrorLines: what a person sees for bad input: one plain line on
// stderr ("skillrun: ..."), naming the flag, file or field, and the
// documented exit code (golden).
func TestErrorLines(t *testing.T) {
	f := fake.New()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"kill", "--bogus", "c1"}, 1, `skillrun: kill: flag provided but not defined: -bogus (see skillrun kill --help)`},
		{[]string{"--log-format", "yaml", "list"}, 1, `skillrun: --log-format: "yaml" is not text or json`},
		{[]string{"nosuch"}, 1, `skillrun: no such command "nosuch" (see skillrun --help)`},
	} {
		r := call(t, f, "", c.args...)
		if r.code != c.code || r.stderr != c.want+"\n" {
			t.Errorf("%v: exit %d, stderr %q\nwant exit %d, %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}
