package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/skillrun/skillrun/spec"
)

// TestResolveScript: a relative script of an interpreter that is not in
// the workspace but is in the skill runs from /skill; everything else is
// left as given.
func TestResolveScript(t *testing.T) {
	skill := t.TempDir()
	ws := t.TempDir()
	for _, f := range []string{"scripts/fill.py", "tool.js", "both.py"} {
		p := filepath.Join(skill, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, nil, 0o644)
	}
	os.WriteFile(filepath.Join(ws, "both.py"), nil, 0o644)
	sk := &spec.Skill{Name: "s", Dir: skill}
	for _, c := range []struct {
		args []string
		cwd  string
		ws   string
		want []string
		note bool
	}{
		{[]string{"python3", "scripts/fill.py", "a.pdf"}, "", ws, []string{"python3", "/skill/scripts/fill.py", "a.pdf"}, true},
		{[]string{"python3", "-u", "-W", "ignore", "scripts/fill.py"}, "", ws, []string{"python3", "-u", "-W", "ignore", "/skill/scripts/fill.py"}, true},
		{[]string{"node", "tool.js"}, "/workspace", ws, []string{"node", "/skill/tool.js"}, true},
		{[]string{"/usr/bin/python3.11", "./scripts/fill.py"}, "", ws, []string{"/usr/bin/python3.11", "/skill/scripts/fill.py"}, true},
		{[]string{"python3", "both.py"}, "", ws, []string{"python3", "both.py"}, false},                       // the workspace's own
		{[]string{"python3", "scripts/fill.py"}, "/skill", ws, []string{"python3", "scripts/fill.py"}, false}, // runs in /skill already
		{[]string{"python3", "scripts/fill.py"}, "", "", []string{"python3", "scripts/fill.py"}, false},       // no workspace: cwd /skill
		{[]string{"python3", "-m", "scripts.fill"}, "", ws, []string{"python3", "-m", "scripts.fill"}, false},
		{[]string{"python3", "-c", "print(1)"}, "", ws, []string{"python3", "-c", "print(1)"}, false},
		{[]string{"python3", "../x.py"}, "", ws, []string{"python3", "../x.py"}, false},
		{[]string{"python3", "missing.py"}, "", ws, []string{"python3", "missing.py"}, false},
		{[]string{"cat", "scripts/fill.py"}, "", ws, []string{"cat", "scripts/fill.py"}, false}, // not an interpreter
		{[]string{"python3", "scripts"}, "", ws, []string{"python3", "scripts"}, false},         // a folder
	} {
		got, note := resolveScript(sk, c.ws, spec.Exec{Args: c.args, Cwd: c.cwd})
		if !reflect.DeepEqual(got, c.want) || (note != "") != c.note {
			t.Errorf("resolveScript(%q, cwd %q) = %q, %q; want %q (note %v)", c.args, c.cwd, got, note, c.want, c.note)
		}
	}
	if got, _ := resolveScript(spec.Bare(), ws, spec.Exec{Args: []string{"python3", "scripts/fill.py"}}); got[1] != "scripts/fill.py" {
		t.Errorf("a sandbox without a skill resolved %q", got)
	}
}

// TestMissingModule reads the interpreters' import errors.
func TestMissingModule(t *testing.T) {
	for _, c := range []struct{ stderr, mod string }{
		{"Traceback ...\nModuleNotFoundError: No module named 'pypdf'\n", "pypdf"},
		{"ModuleNotFoundError: No module named 'google.protobuf'", "google.protobuf"},
		{"Error: Cannot find module 'docx'\nRequire stack:", "docx"},
		{"Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'marked' imported from /skill/x.mjs", "marked"},
		{"Error: Cannot find module './lib/helper'", ""},
		{"ImportError: cannot import name 'x'", ""},
	} {
		mod, hint := missingModule([]byte(c.stderr))
		if mod != c.mod || (mod != "") != (hint != "") {
			t.Errorf("missingModule(%q) = %q, %q; want %q", c.stderr, mod, hint, c.mod)
		}
	}
}

// TestNotFoundRE reads the exec shell's reports.
func TestNotFoundRE(t *testing.T) {
	m := notFoundRE().FindStringSubmatch("sh: 1: exec: nope: not found\n")
	if m == nil || m[1] != "nope" || m[2] != "not found" {
		t.Errorf("not found: %q", m)
	}
	m = notFoundRE().FindStringSubmatch("x\nsh: 1: exec: ./a b: Permission denied\n")
	if m == nil || m[1] != "./a b" || m[2] != "Permission denied" {
		t.Errorf("permission denied: %q", m)
	}
	if notFoundRE().MatchString("python3: can't open file 'x': [Errno 2] No such file or directory") {
		t.Error("matched an interpreter's own error")
	}
}

// TestPythonWarmable: which commands a waiting python3 runs as they are.
func TestPythonWarmable(t *testing.T) {
	for args, want := range map[string]bool{
		"python3 s.py a":        true,
		"python3 -c code x":     true,
		"python3 -m json.tool":  true,
		"python3":               false,
		"python3 -c":            false,
		"python3 -u s.py":       false,
		"python3 - x":           false,
		"python s.py":           false,
		"/usr/bin/python3 s.py": false,
		"node s.js":             false,
	} {
		if got := PythonWarmable(strings.Fields(args)); got != want {
			t.Errorf("PythonWarmable(%q) = %v, want %v", args, got, want)
		}
	}
}

// countingDeps is a DepsProvider that counts Acquire calls and builds
// nothing.
type countingDeps struct{ acquired int }

func (d *countingDeps) Acquire(context.Context, *spec.Skill) (*spec.DepsEnv, *EnvInfo, func(), error) {
	d.acquired++
	return nil, nil, nil, errors.New("no environment in this test")
}

// TestExecBadCwdBeforeDeps: a --cwd outside the sandbox's folders is
// refused as bad input before the skill's dependency environment is
// acquired (built or downloaded); a good one goes on to acquire it (the
// control).
func TestExecBadCwdBeforeDeps(t *testing.T) {
	sk := load(t, "table-report")
	if sk.Deps.Empty() {
		t.Fatal("table-report declares no dependencies")
	}
	tmp := t.TempDir()
	for _, c := range []struct {
		cwd, ws string
		bad     bool
	}{
		{"/etc", "", true},
		{"/skill/../etc", "", true},
		{"/workspace", "", true}, // no workspace granted
		{"/skill/scripts", "", false},
		{"/workspace", tmp, false},
	} {
		deps := &countingDeps{}
		rt := &fakeRT{behave: exited("", "", 0, true)}
		opts := Options{Grants: spec.Grants{Workspace: c.ws}, TempDir: tmp, Deps: deps,
			Exec: &Exec{Exec: spec.Exec{Args: []string{"true"}, Cwd: c.cwd}}}
		_, err := Run(context.Background(), rt, sk, nil, opts)
		switch {
		case c.bad && (!IsInputError(err) || !strings.Contains(err.Error(), "--cwd")):
			t.Errorf("--cwd %s: err = %v, want an InputError naming --cwd", c.cwd, err)
		case c.bad && deps.acquired != 0:
			t.Errorf("--cwd %s: the dependency environment was acquired before the refusal", c.cwd)
		case !c.bad && deps.acquired != 1:
			t.Errorf("--cwd %s (control): acquired %d times, err %v", c.cwd, deps.acquired, err)
		}
		if rt.runs != 0 {
			t.Errorf("--cwd %s: runtime called", c.cwd)
		}
	}
}

// TestOnExecPath: a program found on the sandbox's PATH, in the first
// host folder bound there that has it, as a regular file anyone may run,
// is exec'd directly; anything else goes through the shell that reports
// it (127, 126).
func TestOnExecPath(t *testing.T) {
	env := &spec.DepsEnv{Dir: t.TempDir(), Python: "python3.11"}
	bin := filepath.Join(env.Dir, "python", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(bin, "tool"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(bin, "private"), []byte("#!/bin/sh\n"), 0o700)
	os.WriteFile(filepath.Join(bin, "sh"), []byte("not executable"), 0o644) // shadows /usr/bin/sh
	os.Mkdir(filepath.Join(bin, "dir"), 0o755)
	for _, c := range []struct {
		name string
		env  *spec.DepsEnv
		want bool
	}{
		{"sh", nil, true}, // /usr/bin/sh
		{"tool", env, true},
		{"tool", nil, false},
		{"private", env, false}, // not executable by the sandbox's user
		{"sh", env, false},      // the first folder's sh decides
		{"dir", env, false},
		{"no-such-command-here", nil, false},
		{"./tool", env, false},
		{"scripts/x.sh", nil, false},
		{"", nil, false},
	} {
		if got := onExecPath(c.name, c.env); got != c.want {
			t.Errorf("onExecPath(%q, env %v) = %v, want %v", c.name, c.env != nil, got, c.want)
		}
	}
}

// TestWarmCommandKeepsExecShell: a sandbox prepared for commands keeps the
// exec shell in front of every command it will run (its placeholder is
// never exec'd directly), so a missing or non-executable program ends as
// in a cold run (127, 126, named); a python3 zygote, found on PATH, is
// started directly.
func TestWarmCommandKeepsExecShell(t *testing.T) {
	sk := spec.Bare()
	rt := &fakeRT{behave: exited("", "", 0, true)}
	sb, _, err := Prepare(context.Background(), rt, sk, Options{TempDir: t.TempDir()}, EntryCommand)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if n := len(spec.ExecShell); len(sb.cmdPrefix) < n || !reflect.DeepEqual(sb.cmdPrefix[len(sb.cmdPrefix)-n:], spec.ExecShell) {
		t.Errorf("command prefix %q: want it to end with the exec shell %q", sb.cmdPrefix, spec.ExecShell)
	}
	py, _, err := Prepare(context.Background(), rt, sk, Options{TempDir: t.TempDir()}, EntryPython)
	if err != nil {
		t.Fatal(err)
	}
	defer py.Close()
	if args := py.c.sp.Process.Args; slices.Contains(args, spec.ExecShell[2]) || args[len(args)-3] != "python3" {
		t.Errorf("python zygote args %q: want python3 -c ZYGOTE after the holder, without the exec shell", args)
	}
}
