package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRequirements(t *testing.T) {
	good := []string{"requests==2.31.0", "pypdf>=4,<5", "Foo_Bar.baz[extra1, extra2]~=1.2", "numpy; python_version >= \"3.8\"",
		"x==1.0 --hash=sha256:0123abcd", "plain"}
	out, err := ParseRequirements("requirements.txt", append(good, "", "# comment", "y==2  # trailing"), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(good)+1 || out[len(out)-1] != "y==2" {
		t.Errorf("normalized %q", out)
	}
	for _, bad := range []string{"-e .", "--index-url https://x", "-r other.txt", "pkg @ https://x/p.whl", "git+https://x/y.git",
		"./pkg", "/abs/pkg", "x==1 --install-option=--prefix=/", "x==1 \\", "x=>1", "-f /tmp", "x ==1 --hash=md5:00"} {
		_, err := ParseRequirements("requirements.txt", []string{"ok==1", bad}, true)
		if err == nil || !strings.Contains(err.Error(), "requirements.txt: line 2:") {
			t.Errorf("%q: want a line-2 error, got %v", bad, err)
		}
	}
}

func writeFiles(t *testing.T, files map[string]string) string {
	dir := filepath.Join(t.TempDir(), "s")
	if _, ok := files["SKILL.md"]; !ok {
		files["SKILL.md"] = "---\nname: s\ndescription: d\n---\n"
	}
	if _, ok := files["main.py"]; !ok {
		files["main.py"] = "print(1)\n"
	}
	for k, v := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, k)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadDeps(t *testing.T) {
	sk, err := Load(writeFiles(t, map[string]string{"requirements.txt": "a==1\n", "requirements.lock": "a==1 --hash=sha256:ab\n"}))
	if err != nil {
		t.Fatal(err)
	}
	if p := sk.Deps.Python; p == nil || p.Source != RequirementsFile || strings.Join(p.Lock, "") != "a==1 --hash=sha256:ab" {
		t.Errorf("python deps %+v", p)
	}
	sk, err = Load(writeFiles(t, map[string]string{"sandbox.yaml": "dependencies:\n  node: [\"left-pad@1.3.0\", \"@scope/x@^2\", \"bare\"]\n  python: [\"b>=2\"]\n"}))
	if err != nil {
		t.Fatal(err)
	}
	if n := sk.Deps.Node; n == nil || n.Dependencies["left-pad"] != "1.3.0" || n.Dependencies["@scope/x"] != "^2" || n.Dependencies["bare"] != "latest" || n.Source != ManifestFile {
		t.Errorf("node deps %+v", n)
	}
	if sk.Deps.Python == nil || sk.Deps.Python.Requirements[0] != "b>=2" {
		t.Errorf("python deps %+v", sk.Deps.Python)
	}
	sk, err = Load(writeFiles(t, map[string]string{"package.json": `{"scripts":{"postinstall":"evil"},"dependencies":{"loc":"file:./vendor/loc.tgz"}}`, "vendor/loc.tgz": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if n := sk.Deps.Node; n == nil || strings.Join(n.LocalFiles, ",") != "vendor/loc.tgz" || strings.Contains(string(n.PackageJSON()), "postinstall") {
		t.Errorf("local file dep %+v / %s", n, n.PackageJSON())
	}
	if sk, _ = Load(writeFiles(t, map[string]string{})); !sk.Deps.Empty() {
		t.Error("a skill without declarations has dependencies")
	}
	for name, c := range map[string]struct {
		files map[string]string
		want  string
	}{
		"both python":   {map[string]string{"requirements.txt": "a\n", "sandbox.yaml": "dependencies:\n  python: [b]\n"}, "declare them in one place"},
		"lock alone":    {map[string]string{"requirements.lock": "a==1 --hash=sha256:ab\n"}, "no Python requirements to lock"},
		"lock unpinned": {map[string]string{"requirements.txt": "a\n", "requirements.lock": "a>=1\n"}, "every line must pin"},
		"bad json":      {map[string]string{"package.json": "{"}, "package.json:"},
		"npm url":       {map[string]string{"package.json": `{"dependencies":{"x":"https://evil.test/x.tgz"}}`}, "is not allowed"},
		"npm alias":     {map[string]string{"package.json": `{"dependencies":{"x":"npm:evil@1"}}`}, "is not allowed"},
		"npm escape":    {map[string]string{"package.json": `{"dependencies":{"x":"file:../x"}}`}, "leaves the skill folder"},
		"npm missing":   {map[string]string{"package.json": `{"dependencies":{"x":"file:nope.tgz"}}`}, "not a file or folder"},
		"npm name":      {map[string]string{"package.json": `{"dependencies":{"../x":"1"}}`}, "not an npm package name"},
		"optional":      {map[string]string{"package.json": `{"optionalDependencies":{"x":"1"}}`}, "optionalDependencies"},
		"yaml key":      {map[string]string{"sandbox.yaml": "dependencies:\n  ruby: [x]\n"}, "ruby"},
	} {
		if _, err := Load(writeFiles(t, c.files)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want %q, got %v", name, c.want, err)
		}
	}
}

func TestGenerateWithDeps(t *testing.T) {
	sk, err := Load(writeFiles(t, map[string]string{"requirements.txt": "a\n"}))
	if err != nil {
		t.Fatal(err)
	}
	env := &DepsEnv{Dir: "/cache/envs/k", Python: "python3.11", Node: true}
	sp, err := Generate(sk, "linux", WithHostID(1000, 1000), WithDeps(env), WithHostLayout(HostLayout{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(sp); err != nil {
		t.Fatal(err)
	}
	if sp.Process.Args[0] != EnvMount+"/python/bin/python3" || sp.Process.Args[1] != "-B" {
		t.Errorf("args %q", sp.Process.Args)
	}
	mounts := map[string]string{}
	for _, m := range sp.Mounts {
		mounts[m.Destination] = m.Source + " " + strings.Join(m.Options, ",")
	}
	if got := mounts[EnvMount]; !strings.HasPrefix(got, "/cache/envs/k ") || !strings.Contains(got, ",ro,") {
		t.Errorf("%s mount %q", EnvMount, got)
	}
	if got := mounts[NodeModulesMount]; !strings.HasPrefix(got, "/cache/envs/k/node/node_modules ") || !strings.Contains(got, ",ro,") {
		t.Errorf("%s mount %q", NodeModulesMount, got)
	}
	if !strings.Contains(strings.Join(sp.Process.Env, " "), "NODE_PATH=/node_modules") {
		t.Error("NODE_PATH not set")
	}
	// The runner's own command replaces the entry point.
	sp, err = Generate(sk, "linux", WithHostID(1000, 1000), WithHostLayout(HostLayout{}), WithCommand([]string{"/bin/sh", "-c", "true"}, map[string]string{"X": "1"}))
	if err != nil || sp.Process.Args[0] != "/bin/sh" || !strings.Contains(strings.Join(sp.Process.Env, " "), "X=1") {
		t.Errorf("command: %v %q", err, sp.Process.Args)
	}
	if _, err := Generate(sk, "linux", WithHostID(1000, 1000), WithHostLayout(HostLayout{}), WithCommand([]string{"x"}, map[string]string{"PATH": "/evil"})); err == nil {
		t.Error("a command may not override PATH")
	}
	if _, err := Generate(sk, "darwin", WithHostID(1000, 1000), WithBundleDir(t.TempDir()), WithDeps(env)); err == nil {
		t.Error("darwin accepted a dependency environment")
	}
}
