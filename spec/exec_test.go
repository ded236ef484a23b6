package spec

import (
	"slices"
	"strings"
	"testing"
)

func envOf(env []string, k string) (string, bool) {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v, true
		}
	}
	return "", false
}

// TestGenerateExec: a command replaces the entry point under the exec
// shell, starts in /workspace (else /skill), finds the environment's
// interpreters first on PATH and the skill's library on PYTHONPATH; --cwd
// stays inside /skill and /workspace.
func TestGenerateExec(t *testing.T) {
	s := loadExample(t, "calculator")
	base := []Option{WithHostLayout(testLayout), WithHostID(1000, 1000)}
	sp, err := Generate(s, "linux", append(base, WithExec(Exec{Args: []string{"python3", "x.py"}}))...)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(ExecShell), "python3", "x.py"); !slices.Equal(sp.Process.Args, want) || sp.Process.Cwd != SkillMount {
		t.Errorf("args %q cwd %q", sp.Process.Args, sp.Process.Cwd)
	}
	// A program the caller found on the sandbox's PATH runs without the
	// shell.
	if d, err := Generate(s, "linux", append(base, WithExec(Exec{Args: []string{"python3", "x.py"}, Direct: true}))...); err != nil || !slices.Equal(d.Process.Args, []string{"python3", "x.py"}) {
		t.Errorf("direct exec: %v %v", err, d)
	}
	if v, _ := envOf(sp.Process.Env, "PYTHONPATH"); v != SkillMount {
		t.Errorf("PYTHONPATH %q", v)
	}
	ws := t.TempDir()
	deps := &DepsEnv{Dir: t.TempDir(), Python: "python3.11", Node: true}
	sp, err = Generate(s, "linux", append(base, WithGrants(Grants{Workspace: ws}), WithDeps(deps), WithExec(Exec{Args: []string{"node", "t.js"}}))...)
	if err != nil {
		t.Fatal(err)
	}
	if sp.Process.Cwd != WorkspaceMount {
		t.Errorf("cwd with a workspace %q", sp.Process.Cwd)
	}
	if v, _ := envOf(sp.Process.Env, "PATH"); !strings.HasPrefix(v, EnvMount+"/python/bin:"+NodeModulesMount+"/.bin:") {
		t.Errorf("PATH %q: the environment's bins first", v)
	}
	for _, c := range []struct {
		cwd string
		ok  bool
	}{{"/skill/scripts", true}, {"/workspace/out", true}, {"/etc", false}, {"/skill/../etc", false}, {"skill", false}, {"/workspacex", false}} {
		_, err := Generate(s, "linux", append(base, WithGrants(Grants{Workspace: ws}), WithExec(Exec{Args: []string{"true"}, Cwd: c.cwd}))...)
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "--cwd")) {
			t.Errorf("cwd %q: %v", c.cwd, err)
		}
	}
	if _, err := Generate(s, "linux", append(base, WithExec(Exec{Args: []string{"true"}, Cwd: "/workspace"}))...); err == nil {
		t.Error("--cwd /workspace accepted without a workspace")
	}
	if _, err := Generate(s, "linux", append(base, WithExec(Exec{}))...); err == nil {
		t.Error("an empty command accepted")
	}
}

// TestGenerateBare: a sandbox without a skill has no /skill, no SKILL_DIR
// and no PYTHONPATH, and passes the profile's validation.
func TestGenerateBare(t *testing.T) {
	ws := t.TempDir()
	sp, err := Generate(Bare(), "linux", WithHostLayout(testLayout), WithHostID(1000, 1000), WithGrants(Grants{Workspace: ws}), WithExec(Exec{Args: []string{"ls"}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range sp.Mounts {
		if m.Destination == SkillMount {
			t.Errorf("a bare sandbox mounts %s", SkillMount)
		}
	}
	for _, k := range []string{"SKILL_DIR", "PYTHONPATH"} {
		if _, ok := envOf(sp.Process.Env, k); ok {
			t.Errorf("a bare sandbox sets %s", k)
		}
	}
	if sp.Process.Cwd != WorkspaceMount {
		t.Errorf("cwd %q", sp.Process.Cwd)
	}
	if err := Validate(sp); err != nil {
		t.Errorf("validate: %v", err)
	}
	if _, err := Generate(Bare(), "linux", WithHostLayout(testLayout), WithHostID(1000, 1000)); err == nil {
		t.Error("a bare sandbox generated without a command")
	}
}

// TestWithPackages: --with adds pip requirements and npm packages, and
// refuses URLs, paths and options naming the flag.
func TestWithPackages(t *testing.T) {
	s := Bare()
	if err := s.WithPackages([]string{"tabulate==0.9.0", "npm:left-pad@1.3.0", "requests>=2,<3"}); err != nil {
		t.Fatal(err)
	}
	if p := s.Deps.Python; p == nil || strings.Join(p.Requirements, ";") != "tabulate==0.9.0;requests>=2,<3" || p.Source != "--with" {
		t.Errorf("python %+v", p)
	}
	if n := s.Deps.Node; n == nil || n.Dependencies["left-pad"] != "1.3.0" {
		t.Errorf("node %+v", n)
	}
	for _, bad := range []string{"https://x/y.whl", "./pkg", "/abs/pkg", "-e .", "--index-url=http://x", "pkg @ https://x", "npm:left-pad@file:../x", "npm:Bad Name@1", "npm:x@git+https://x"} {
		if err := Bare().WithPackages([]string{bad}); err == nil || !strings.HasPrefix(err.Error(), "--with ") {
			t.Errorf("--with %q: %v", bad, err)
		}
	}
}

// TestDepsInScripts: requirements.txt and package.json are read in
// scripts/ as at the top; both places at once is an error.
func TestDepsInScripts(t *testing.T) {
	s, err := Load(writeSkill(t, "demo", map[string]string{"SKILL.md": okSkillMD, "scripts/requirements.txt": "tabulate==0.9.0\n",
		"scripts/package.json": `{"dependencies": {"marked": "12.0.0", "local": "file:vendor/l.tgz"}}`, "scripts/vendor/l.tgz": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Deps.Python; p == nil || p.Source != "scripts/requirements.txt" || p.Requirements[0] != "tabulate==0.9.0" {
		t.Errorf("python %+v", p)
	}
	if n := s.Deps.Node; n == nil || n.Source != "scripts/package.json" || n.Dependencies["local"] != "file:scripts/vendor/l.tgz" {
		t.Errorf("node %+v", n)
	}
	_, err = Load(writeSkill(t, "demo", map[string]string{"SKILL.md": okSkillMD, "requirements.txt": "a==1\n", "scripts/requirements.txt": "b==1\n"}))
	if err == nil || !strings.Contains(err.Error(), "scripts/requirements.txt: requirements.txt declares") {
		t.Errorf("both places: %v", err)
	}
}

// TestBareNoManifestWords: a sandbox without a skill has no sandbox.yaml
// and no /skill: the operator's grants are not "beyond the manifest" (no
// warning names one) and a --cwd outside /workspace is refused naming
// /workspace alone.
func TestBareNoManifestWords(t *testing.T) {
	ws := t.TempDir()
	for _, g := range []Grants{
		{Workspace: ws, AllowHosts: []string{"example.com:443"}, Env: map[string]string{"K": "v"}},
		{Workspace: ws, Network: NetworkHost},
		{Workspace: ws, Network: NetworkAllow},
	} {
		p, err := Resolve(Bare(), WithGrants(g), WithExec(Exec{Args: []string{"true"}}))
		if err != nil {
			t.Fatalf("%+v: %v", g, err)
		}
		for _, w := range p.Warnings {
			if strings.Contains(w, ManifestFile) || strings.Contains(w, "skill") {
				t.Errorf("%+v: warning %q speaks of a skill or its manifest", g, w)
			}
		}
	}
	err := CheckExec(Bare(), ws, Exec{Args: []string{"true"}, Cwd: SkillMount})
	if err == nil || strings.Contains(err.Error(), "inside "+SkillMount) || !strings.Contains(err.Error(), WorkspaceMount) {
		t.Errorf("--cwd /skill in a sandbox without a skill: %v", err)
	}
	// A skill's sandbox names both (the control).
	sk := &Skill{Name: "s", Dir: t.TempDir()}
	if err := CheckExec(sk, "", Exec{Args: []string{"true"}, Cwd: "/etc"}); err == nil || !strings.Contains(err.Error(), SkillMount+" or "+WorkspaceMount) {
		t.Errorf("--cwd /etc in a skill's sandbox: %v", err)
	}
}
