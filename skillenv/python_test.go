package skillenv

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skillrun/skillrun/spec"
)

// newBuild is a build of key "k" in a fresh cache, staged nowhere yet.
func newBuild(t *testing.T) *build {
	t.Helper()
	c := Cache{Dir: t.TempDir()}
	if err := c.init(); err != nil {
		t.Fatal(err)
	}
	staging := filepath.Join(c.Dir, "build", "k-1")
	if err := os.Mkdir(staging, 0o700); err != nil {
		t.Fatal(err)
	}
	return &build{key: "k", staging: staging, cache: c, marker: &Marker{Key: "k"}, env: map[string]string{}}
}

// testAccess is how a build reaches an index the operator gave as url (a
// named host resolves to a public address).
func testAccess(t *testing.T, url, synthetic string) *indexAccess {
	t.Helper()
	a, err := access(context.Background(), url, synthetic, func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("151.101.0.223")}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPythonIndexURL(t *testing.T) {
	if url, synth := (&python{}).indexURL(); url != DefaultPipIndex || synth != "pypi.index.skillrun.internal" {
		t.Errorf("default index %q %q", url, synth)
	}
	if url, _ := (&python{index: Index{PipIndexURL: "http://127.0.0.1:8080/simple/", NpmRegistry: "http://x/"}}).indexURL(); url != "http://127.0.0.1:8080/simple/" {
		t.Errorf("operator's index %q", url)
	}
}

// TestPythonStage: the venv made by hand, the requirements and the pip
// command the build runs (binary wheels only, the operator's CA, a
// plain-HTTP index trusted by name).
func TestPythonStage(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, []byte("CA\n"), 0o644)
	b := newBuild(t)
	py := &python{
		plan:  &PythonPlan{Deps: &spec.PythonDeps{Requirements: []string{"x==1", "y>=2"}}, Interpreter: Interpreter{Path: "/usr/bin/python3.11"}, Name: "python3.11"},
		index: Index{PipCert: ca},
	}
	if err := py.stage(b, testAccess(t, "http://127.0.0.1:8080/simple/", "pypi.index.skillrun.internal")); err != nil {
		t.Fatal(err)
	}
	want := []string{"echo '== pip install'", shellJoin([]string{"/usr/bin/python3.11", "-s", "-E", "-m", "pip", "install",
		"--isolated", "--no-input", "--disable-pip-version-check", "--no-cache-dir", "--no-warn-script-location",
		"--progress-bar", "off", "--target", "/workspace/python/lib/python3.11/site-packages",
		"--report", "/workspace/pip-report.json", "--index-url", "http://pypi.index.skillrun.internal:8080/simple/",
		"--trusted-host", "pypi.index.skillrun.internal:8080", "--cert", "/workspace/.build/pip-ca.pem",
		"--only-binary", ":all:", "-r", "/workspace/requirements.txt"})}
	if !slices.Equal(b.script, want) {
		t.Errorf("script\n%q\nwant\n%q", b.script, want)
	}
	if l, err := os.Readlink(filepath.Join(b.staging, "python", "bin", "python3")); err != nil || l != "/usr/bin/python3.11" {
		t.Errorf("bin/python3 -> %q, %v", l, err)
	}
	if got := readFile(t, filepath.Join(b.staging, "python", "pyvenv.cfg")); got != "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11\n" {
		t.Errorf("pyvenv.cfg %q", got)
	}
	if fi, err := os.Stat(filepath.Join(b.staging, "python", "lib", "python3.11", "site-packages")); err != nil || !fi.IsDir() {
		t.Errorf("site-packages: %v", err)
	}
	if got := readFile(t, filepath.Join(b.staging, "requirements.txt")); got != "x==1\ny>=2\n" {
		t.Errorf("requirements.txt %q", got)
	}
	if got := readFile(t, filepath.Join(b.staging, ".build", "pip-ca.pem")); got != "CA\n" {
		t.Errorf("CA %q", got)
	}
	if b.marker.PythonName != "python3.11" || len(b.env) != 0 {
		t.Errorf("marker %+v, env %v", b.marker, b.env)
	}
}

// TestPythonStageLock: without a shipped lock, the lock an earlier build
// of the key resolved pins every distribution by hash; source builds
// drop --only-binary.
func TestPythonStageLock(t *testing.T) {
	b := newBuild(t)
	if err := os.WriteFile(b.resolvedPath("requirements.lock"), []byte("x==1 --hash=sha256:aa\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	py := &python{
		plan:   &PythonPlan{Deps: &spec.PythonDeps{Requirements: []string{"x==1"}}, Interpreter: Interpreter{Path: "/usr/bin/python3.11"}, Name: "python3.11"},
		policy: Policy{SourceBuilds: true},
	}
	if err := py.stage(b, testAccess(t, DefaultPipIndex, "s")); err != nil {
		t.Fatal(err)
	}
	cmd := b.script[len(b.script)-1]
	for _, s := range []string{"'--no-build-isolation' '--require-hashes' '--no-deps' '-r' '/workspace/requirements.lock'", "'--index-url' 'https://pypi.org:443/simple/'"} {
		if !strings.Contains(cmd, s) {
			t.Errorf("pip command %s lacks %s", cmd, s)
		}
	}
	if strings.Contains(cmd, "--only-binary") || strings.Contains(cmd, "--trusted-host") {
		t.Errorf("pip command %s", cmd)
	}
	if got := readFile(t, filepath.Join(b.staging, "requirements.lock")); got != "x==1 --hash=sha256:aa\n" {
		t.Errorf("requirements.lock %q", got)
	}
	if _, err := os.Stat(filepath.Join(b.staging, "requirements.txt")); err == nil {
		t.Error("requirements.txt staged next to a lock")
	}
}

// TestPythonCollect: pip's report gives the marker's distributions and
// the lock kept for later builds of the key (not when the skill ships
// its own).
func TestPythonCollect(t *testing.T) {
	report := `{"install":[{"download_info":{"archive_info":{"hashes":{"sha256":"bb"}}},"metadata":{"name":"x","version":"1"}}]}`
	for _, shipped := range []bool{false, true} {
		b := newBuild(t)
		plan := &PythonPlan{Deps: &spec.PythonDeps{Requirements: []string{"x==1"}}}
		if shipped {
			plan.Deps.Lock = []string{"x==1 --hash=sha256:bb"}
		}
		py := &python{plan: plan}
		if err := py.collect(b); err == nil || !strings.Contains(err.Error(), "pip left no report") {
			t.Errorf("no report: %v", err)
		}
		os.WriteFile(filepath.Join(b.staging, "pip-report.json"), []byte(report), 0o644)
		if err := py.collect(b); err != nil {
			t.Fatal(err)
		}
		if strings.Join(b.marker.Python, ",") != "x==1" {
			t.Errorf("marker %v", b.marker.Python)
		}
		resolved, err := os.ReadFile(b.resolvedPath("requirements.lock"))
		if shipped {
			if err == nil {
				t.Error("a shipped lock was kept as resolved")
			}
			continue
		}
		if string(resolved) != "x==1 --hash=sha256:bb\n" || readFile(t, filepath.Join(b.staging, "requirements.lock")) != string(resolved) {
			t.Errorf("resolved lock %q, %v", resolved, err)
		}
	}
}
