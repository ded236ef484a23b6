//go:build integration

package skills_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// pyIndex is a PEP 503 index on loopback serving wheels the test builds
// from its own source; it counts what was downloaded.
type pyIndex struct {
	dir string
	srv *httptest.Server
	mu  sync.Mutex
	got map[string]int
}

func newPyIndex(t *testing.T) *pyIndex {
	ix := &pyIndex{dir: t.TempDir(), got: map[string]int{}}
	fs := http.FileServer(http.Dir(ix.dir))
	ix.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ix.mu.Lock()
		ix.got[r.URL.Path]++
		ix.mu.Unlock()
		fs.ServeHTTP(w, r)
	}))
	t.Cleanup(ix.srv.Close)
	return ix
}

func (ix *pyIndex) url() string { return ix.srv.URL + "/simple/" }

// downloads counts the requests for one wheel.
func (ix *pyIndex) downloads(name, ver string) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.got["/simple/"+name+"/"+wheelName(name, ver)]
}

// requests counts every request the index answered.
func (ix *pyIndex) requests() int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	n := 0
	for _, c := range ix.got {
		n += c
	}
	return n
}

func wheelName(name, ver string) string { return fmt.Sprintf("%s-%s-py3-none-any.whl", name, ver) }

// addWheel builds a pure-Python wheel of package name with __init__.py
// body.
func (ix *pyIndex) addWheel(t *testing.T, name, ver, body string) {
	dist := fmt.Sprintf("%s-%s.dist-info", name, ver)
	files := [][2]string{
		{name + "/__init__.py", body},
		{dist + "/METADATA", fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, ver)},
		{dist + "/WHEEL", "Wheel-Version: 1.0\nGenerator: skillrun-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, f := range files {
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	fmt.Fprintf(&record, "%s/RECORD,,\n", dist)
	files = append(files, [2]string{dist + "/RECORD", record.String()})
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for _, f := range files {
		w, err := z.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f[1]))
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(ix.dir, "simple", name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, wheelName(name, ver)), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// depsSkill writes skill name with files into a fresh folder readable by
// every user (the rootless mode's user reads it) and returns its path.
func depsSkill(t *testing.T, name string, files map[string]string) string {
	parent, err := os.MkdirTemp("", "skillrun-deps-skill-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	dir := filepath.Join(parent, name)
	files["SKILL.md"] = fmt.Sprintf("---\nname: %s\ndescription: a skill that imports packages\n---\n", name)
	for rel, body := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{parent, dir} {
		os.Chmod(d, 0o755)
	}
	return dir
}

// envCache is a cache folder owned by the mode's user.
func envCache(t *testing.T, m *mode) string {
	dir, err := os.MkdirTemp("", "skillrun-env-cache-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o700)
			}
			return nil
		})
		os.RemoveAll(dir)
	})
	os.Chmod(dir, 0o755)
	if m.user != nil {
		if err := os.Chown(dir, m.uid, m.gid); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "envs")
}

// depsResult is the part of skill run's result about the environment.
type depsResult struct {
	skillResult
	Environment *struct {
		Key    string   `json:"key"`
		Built  bool     `json:"built"`
		Python []string `json:"python"`
		Node   []string `json:"node"`
		Build  *struct {
			OK      bool `json:"ok"`
			Network *struct {
				Mode  string   `json:"mode"`
				Hosts []string `json:"hosts"`
			} `json:"network"`
		} `json:"build"`
	} `json:"environment"`
}

func (m *mode) depsRun(t *testing.T, want int, dir string, flags ...string) (depsResult, result) {
	t.Helper()
	_, res := m.skillRun(t, want, dir, "{}", flags...)
	var r depsResult
	if want == 0 || want == 3 {
		if err := json.Unmarshal([]byte(res.stdout), &r); err != nil {
			t.Fatalf("result: %v\n%s", err, res)
		}
	}
	return r, res
}

const pyMain = `import json, os, sys
import skilltestpkg
pkg = os.path.dirname(skilltestpkg.__file__)
wrote = True
try:
    open(os.path.join(pkg, "planted.py"), "w").write("x")
except OSError as e:
    wrote = str(e)
print(json.dumps({"answer": skilltestpkg.answer(), "file": skilltestpkg.__file__,
    "system_site": any("dist-packages" in p for p in sys.path), "wrote": wrote}))
`

type pyOut struct {
	Answer     int    `json:"answer"`
	File       string `json:"file"`
	SystemSite bool   `json:"system_site"`
	Wrote      any    `json:"wrote"`
}

// TestDepsPython: a skill importing a package from a loopback index gets a
// read-only environment built once; a changed declaration builds a new
// one; a corrupted or incomplete one is detected and rebuilt; gc removes
// unused ones. Downloads are counted by the index, on the host.
func TestDepsPython(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		ix := newPyIndex(t)
		ix.addWheel(t, "skilltestpkg", "1.0.0", "def answer():\n    return 42\n")
		ix.addWheel(t, "skilltestpkg", "1.1.0", "def answer():\n    return 43\n")
		cache := envCache(t, m)
		sk := depsSkill(t, "pydeps", map[string]string{"requirements.txt": "# pinned\nskilltestpkg==1.0.0\n", "main.py": pyMain})
		flags := []string{"--env-cache", cache, "--pip-index-url", ix.url()}

		r, res := m.depsRun(t, 0, sk, flags...)
		var out pyOut
		if err := json.Unmarshal(r.Output, &out); err != nil || out.Answer != 42 {
			t.Fatalf("want answer 42 from the package: %v\n%s", err, res)
		}
		e := r.Environment
		if e == nil || !e.Built || len(e.Key) != 64 || strings.Join(e.Python, ",") != "skilltestpkg==1.0.0" {
			t.Fatalf("want a built environment with skilltestpkg==1.0.0\n%s", res)
		}
		if e.Build == nil || e.Build.Network == nil || e.Build.Network.Mode != "allowlist" || len(e.Build.Network.Hosts) != 1 {
			t.Fatalf("the build must reach the index through the allowlist only\n%s", res)
		}
		if !strings.HasPrefix(out.File, "/opt/skill-env/python/") || out.SystemSite {
			t.Errorf("package not from the environment, or the system site-packages is on sys.path: %+v", out)
		}
		envDir := filepath.Join(cache, "envs", e.Key)
		pkgDir := filepath.Join(envDir, "python", "lib")
		matches, _ := filepath.Glob(filepath.Join(pkgDir, "python3.*", "site-packages", "skilltestpkg"))
		if len(matches) != 1 {
			t.Fatalf("environment folder %s has no skilltestpkg", envDir)
		}
		if _, err := os.Stat(filepath.Join(matches[0], "planted.py")); err == nil || out.Wrote == true {
			t.Errorf("the skill wrote into its environment (host sees planted.py: %v, skill says %v)", err == nil, out.Wrote)
		}
		if n := ix.downloads("skilltestpkg", "1.0.0"); n != 1 {
			t.Fatalf("wheel downloaded %d times, want 1", n)
		}

		// A cache hit builds nothing and reaches no index.
		r2, res := m.depsRun(t, 0, sk, append(flags, "--no-prepare")...)
		if r2.Environment == nil || r2.Environment.Built || r2.Environment.Key != e.Key {
			t.Fatalf("want the same environment, not built again\n%s", res)
		}
		if n := ix.downloads("skilltestpkg", "1.0.0"); n != 1 {
			t.Fatalf("cache hit downloaded the wheel again (%d)", n)
		}

		// The bundle of the skill mounts the same environment.
		out2 := filepath.Join(ownedDir(t, m), "bundle")
		if res := m.run(t, "", append(append([]string{"skill", "bundle", "-o", out2}, flags...), sk)...); res.code != 0 {
			t.Fatalf("skill bundle\n%s", res)
		}
		cfg, _ := os.ReadFile(filepath.Join(out2, "config.json"))
		if !bytes.Contains(cfg, []byte(envDir)) {
			t.Errorf("the bundle does not mount %s", envDir)
		}

		// A changed declaration is a new environment; the old stays.
		if err := os.WriteFile(filepath.Join(sk, "requirements.txt"), []byte("skilltestpkg==1.1.0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r3, res := m.depsRun(t, 0, sk, flags...)
		if err := json.Unmarshal(r3.Output, &out); err != nil || out.Answer != 43 {
			t.Fatalf("want answer 43 after the change\n%s", res)
		}
		if r3.Environment == nil || !r3.Environment.Built || r3.Environment.Key == e.Key {
			t.Fatalf("want a new environment for the new declaration\n%s", res)
		}
		key2 := r3.Environment.Key
		env2 := filepath.Join(cache, "envs", key2)
		for _, d := range []string{envDir, env2} {
			if _, err := os.Stat(filepath.Join(d, ".skillrun-env.json")); err != nil {
				t.Fatalf("environment %s: %v", d, err)
			}
		}

		// Corruption: a changed file is found by skill prepare, which
		// rebuilds from the resolved lock (the same wheel, by hash).
		init2, _ := filepath.Glob(filepath.Join(env2, "python", "lib", "python3.*", "site-packages", "skilltestpkg", "__init__.py"))
		if len(init2) != 1 {
			t.Fatal("no __init__.py in the new environment")
		}
		os.Chmod(filepath.Dir(init2[0]), 0o755)
		os.Chmod(init2[0], 0o644)
		if err := os.WriteFile(init2[0], []byte("def answer():\n    return -1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chmod(init2[0], 0o444)
		os.Chmod(filepath.Dir(init2[0]), 0o555)
		res = m.run(t, "", append(append([]string{"skill", "prepare"}, flags...), sk)...)
		if res.code != 0 || !strings.Contains(res.stdout, `"status":"built"`) || !strings.Contains(res.stdout, "content changed") {
			t.Fatalf("skill prepare must detect the change and rebuild\n%s", res)
		}
		if b, _ := os.ReadFile(init2[0]); !strings.Contains(string(b), "return 43") {
			t.Fatalf("rebuilt environment has %q", b)
		}
		lock, _ := os.ReadFile(filepath.Join(env2, "requirements.lock"))
		if !strings.Contains(string(lock), "skilltestpkg==1.1.0 --hash=sha256:") {
			t.Errorf("environment lock: %q", lock)
		}
		// A verified one is left as it is.
		res = m.run(t, "", append(append([]string{"skill", "prepare"}, flags...), sk)...)
		if res.code != 0 || !strings.Contains(res.stdout, `"status":"ready"`) || !strings.Contains(res.stdout, `"verified":true`) {
			t.Fatalf("want a verified, ready environment\n%s", res)
		}

		// Incomplete (no marker): the next run rebuilds it.
		os.Chmod(env2, 0o755)
		if err := os.Remove(filepath.Join(env2, ".skillrun-env.json")); err != nil {
			t.Fatal(err)
		}
		r4, res := m.depsRun(t, 0, sk, flags...)
		if r4.Environment == nil || !r4.Environment.Built || r4.Environment.Key != key2 {
			t.Fatalf("want the incomplete environment rebuilt\n%s", res)
		}

		// gc: the first environment is unused; the skill's current one is kept.
		res = m.run(t, "", "skill", "prepare", "--gc", "--env-cache", cache, sk)
		if res.code != 0 || !strings.Contains(res.stdout, e.Key) {
			t.Fatalf("gc must remove the unused environment\n%s", res)
		}
		if _, err := os.Stat(envDir); err == nil {
			t.Errorf("gc left %s", envDir)
		}
		if _, err := os.Stat(env2); err != nil {
			t.Errorf("gc removed the kept environment: %v", err)
		}
	})
}

// TestDepsNotPrepared: --no-prepare refuses a missing environment with a
// one-line error whose `skill prepare` command keeps the run's --env-cache
// (and --pip-index-url when given), and builds nothing (the index is
// never asked).
func TestDepsNotPrepared(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		ix := newPyIndex(t)
		ix.addWheel(t, "skilltestpkg", "1.0.0", "def answer():\n    return 42\n")
		cache := envCache(t, m)
		sk := depsSkill(t, "pydeps", map[string]string{"requirements.txt": "skilltestpkg==1.0.0\n", "main.py": pyMain})
		_, res := m.depsRun(t, 2, sk, "--env-cache", cache, "--pip-index-url", ix.url(), "--no-prepare")
		if !strings.Contains(res.stderr, "skill prepare") || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
			t.Errorf("want one line naming skill prepare\n%s", res)
		}
		// The command it suggests prepares the environment this run
		// lacks: the same cache and index as the run's flags.
		want := "run `skillrun skill prepare --env-cache " + cache + " --pip-index-url " + ix.url() + " " + sk + "` first"
		if !strings.Contains(res.stderr, want) {
			t.Errorf("the hint must keep the run's --env-cache and --pip-index-url: want %q in\n%s", want, res.stderr)
		}
		_, res = m.depsRun(t, 2, sk, "--env-cache", cache, "--no-prepare")
		if want := "run `skillrun skill prepare --env-cache " + cache + " " + sk + "` first"; !strings.Contains(res.stderr, want) {
			t.Errorf("without --pip-index-url: want %q in\n%s", want, res.stderr)
		}
		ix.mu.Lock()
		n := len(ix.got)
		ix.mu.Unlock()
		if n != 0 {
			t.Errorf("the index was asked %d times", n)
		}
		envs, _ := os.ReadDir(filepath.Join(cache, "envs"))
		builds, _ := os.ReadDir(filepath.Join(cache, "build"))
		if len(envs)+len(builds) != 0 {
			t.Errorf("left behind: %d environments, %d builds", len(envs), len(builds))
		}
	})
}

// TestDepsConcurrentFirstRuns: two first runs of one skill build once.
func TestDepsConcurrentFirstRuns(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		ix := newPyIndex(t)
		ix.addWheel(t, "skilltestpkg", "1.0.0", "def answer():\n    return 42\n")
		cache := envCache(t, m)
		sk := depsSkill(t, "pydeps", map[string]string{"requirements.txt": "skilltestpkg==1.0.0\n", "main.py": pyMain})
		var wg sync.WaitGroup
		var built atomic.Int32
		results := make([]result, 3)
		for i := range results {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				results[i] = m.run(t, "", "skill", "run", "--env-cache", cache, "--pip-index-url", ix.url(), "--input", "{}", sk)
				var r depsResult
				if json.Unmarshal([]byte(results[i].stdout), &r) == nil && r.Environment != nil && r.Environment.Built {
					built.Add(1)
				}
			}(i)
		}
		wg.Wait()
		for _, res := range results {
			if res.code != 0 {
				t.Fatalf("a concurrent run failed\n%s", res)
			}
		}
		if built.Load() != 1 || ix.downloads("skilltestpkg", "1.0.0") != 1 {
			t.Fatalf("want one build and one download, got %d builds, %d downloads", built.Load(), ix.downloads("skilltestpkg", "1.0.0"))
		}
		m.assertClean(t)
	})
}

// TestDepsBadDeclarations: declarations that would reach other hosts or
// files are refused with one line naming the file (and line), and leave
// nothing behind.
func TestDepsBadDeclarations(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		cache := envCache(t, m)
		cases := []struct {
			name, file, body, want string
		}{
			{"editable", "requirements.txt", "-e git+https://evil.test/x.git\n", "requirements.txt: line 1"},
			{"index", "requirements.txt", "ok==1\n--index-url https://evil.test/simple\n", "requirements.txt: line 2"},
			{"url", "requirements.txt", "pkg @ https://evil.test/pkg.whl\n", "URLs and paths are not allowed"},
			{"path", "requirements.txt", "./local/pkg\n", "requirements.txt: line 1"},
			{"git", "package.json", `{"dependencies":{"x":"git+https://evil.test/x.git"}}`, "package.json: dependencies: x"},
			{"escape", "package.json", `{"dependencies":{"x":"file:../../etc"}}`, "leaves the skill folder"},
			{"manifest", "sandbox.yaml", "dependencies:\n  python: [\"--extra-index-url=https://evil.test\"]\n", "sandbox.yaml: dependencies.python"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				sk := depsSkill(t, "baddeps", map[string]string{c.file: c.body, "main.py": "print(1)\n"})
				_, res := m.depsRun(t, 2, sk, "--env-cache", cache)
				line := strings.TrimSpace(res.stderr)
				if !strings.Contains(line, c.want) || strings.Contains(line, "\n") {
					t.Errorf("want one line with %q\n%s", c.want, res)
				}
			})
		}
		// The operator's bad index settings: refused before anything runs.
		ok := depsSkill(t, "okdeps", map[string]string{"requirements.txt": "x==1\n", "main.py": "print(1)\n"})
		for flag, v := range map[string]string{"--pip-index-url": "ftp://evil.test/simple", "--npm-registry": "https://user:secret@evil.test/"} {
			for _, verb := range []string{"run", "prepare"} {
				res := m.run(t, "", "skill", verb, "--env-cache", cache, flag, v, ok)
				line := strings.TrimSpace(res.stderr)
				if res.code != 2 || !strings.Contains(line, flag) || strings.Contains(line, "\n") || strings.Contains(line, "secret") {
					t.Errorf("want exit 2 and one line naming %s (no credentials)\n%s", flag, res)
				}
			}
		}
		if _, err := os.Stat(cache); err == nil {
			t.Errorf("a refused skill or flag made the cache %s", cache)
		}
	})
}

// npmReachable tells whether the npm registry answers (CI machines reach
// it; elsewhere the Node tests skip with the reason).
func npmReachable(t *testing.T) {
	c, err := net.DialTimeout("tcp", "registry.npmjs.org:443", 5*time.Second)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the npm registry is not reachable in CI: %v", err)
		}
		t.Skipf("skipped: the npm registry is not reachable: %v", err)
	}
	c.Close()
}

// caFlags passes the operator's extra CA bundle (a TLS-inspecting proxy's)
// to the build, as an operator would.
func caFlags() []string {
	if v := os.Getenv("NODE_EXTRA_CA_CERTS"); v != "" {
		return []string{"--npm-cafile", v}
	}
	return nil
}

// TestDepsNode: a Node skill requiring a real npm package, from the
// registry through the allowlist, with require and import alike.
func TestDepsNode(t *testing.T) {
	npmReachable(t)
	forEachMode(t, func(t *testing.T, m *mode) {
		cache := envCache(t, m)
		sk := depsSkill(t, "nodedeps", map[string]string{
			"package.json": `{"name":"nodedeps","version":"1.0.0","scripts":{"postinstall":"exit 1"},"dependencies":{"is-number":"7.0.0"}}`,
			"main.mjs": `import isNumber from 'is-number';
import { createRequire } from 'node:module';
const req = createRequire(import.meta.url);
console.log(JSON.stringify({ five: isNumber(5), word: isNumber('x'), where: req.resolve('is-number') }));
`,
		})
		flags := append([]string{"--env-cache", cache}, caFlags()...)
		r, res := m.depsRun(t, 0, sk, flags...)
		var out struct {
			Five, Word bool
			Where      string
		}
		if err := json.Unmarshal(r.Output, &out); err != nil || !out.Five || out.Word || out.Where != "/node_modules/is-number/index.js" {
			t.Fatalf("want is-number from /node_modules: %v\n%s", err, res)
		}
		if r.Environment == nil || !r.Environment.Built || strings.Join(r.Environment.Node, ",") != "is-number@7.0.0" {
			t.Fatalf("want a built environment with is-number@7.0.0\n%s", res)
		}
		if h := r.Environment.Build.Network.Hosts; len(h) != 1 || h[0] != "registry.npmjs.org:443" {
			t.Errorf("build granted %v, want the registry only", h)
		}
		r2, res := m.depsRun(t, 0, sk, append(flags, "--no-prepare")...)
		if r2.Environment == nil || r2.Environment.Built {
			t.Fatalf("second run must reuse the environment\n%s", res)
		}
	})
}

// traps are what hostile install code goes for, watched from the host: a
// readable canary file, a path it must not create, and a loopback
// listener that counts connections.
type traps struct {
	canary, escape string
	port           int
	reached        atomic.Int32
}

func newTraps(t *testing.T, secret string) *traps {
	secrets := t.TempDir()
	os.Chmod(secrets, 0o755)
	tr := &traps{canary: filepath.Join(secrets, "canary"), escape: filepath.Join(secrets, "escaped")}
	if err := os.WriteFile(tr.canary, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tr.reached.Add(1)
			c.Close()
		}
	}()
	tr.port = ln.Addr().(*net.TCPAddr).Port
	return tr
}

// evilTarball is an npm package whose install script tries to read a host
// file, reach a host listener and write a host file, and records what it
// managed in its own folder.
func evilTarball(t *testing.T, canary, escape string, port int) []byte {
	script := fmt.Sprintf(`const fs = require('fs'), net = require('net'), http = require('http');
const out = { ran: true };
try { out.canary = fs.readFileSync(%q, 'utf8'); } catch (e) { out.canary_err = e.code; }
try { fs.writeFileSync(%q, 'escaped'); out.wrote = true; } catch (e) { out.write_err = e.code; }
const done = () => fs.writeFileSync(__dirname + '/result.json', JSON.stringify(out));
let pending = 2;
const fin = () => { if (--pending === 0) done(); };
const s = net.connect(%d, '127.0.0.1', () => { out.direct = true; s.end(); fin(); });
s.on('error', e => { out.direct_err = e.code; fin(); });
s.setTimeout(3000, () => { s.destroy(); out.direct_err = 'timeout'; fin(); });
const r = http.get({ host: '127.0.0.1', port: 3128, path: 'http://127.0.0.1:%d/', timeout: 3000 }, res => { out.proxy = res.statusCode; res.resume(); fin(); });
r.on('error', e => { out.proxy_err = e.code; fin(); });
`, canary, escape, port, port)
	files := map[string]string{
		"package/package.json": `{"name":"evil","version":"1.0.0","scripts":{"postinstall":"node install.js"}}`,
		"package/install.js":   script,
		"package/index.js":     "module.exports = 1;\n",
	}
	return targz(files)
}

// targz is a gzipped tar of files (name: content), mode 0644, time 0.
func targz(files map[string]string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0)})
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// TestDepsInstallContained: an install script (opted in) runs in the build
// sandbox: the host proves it read no host file, reached no host listener
// and created no host file. Without the opt-in it does not run at all.
func TestDepsInstallContained(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		tr := newTraps(t, "canary-5d1e")
		canary, escape, port, reached := tr.canary, tr.escape, tr.port, &tr.reached
		tgz := evilTarball(t, canary, escape, port)
		for _, scripts := range []bool{false, true} {
			cache := envCache(t, m)
			sk := depsSkill(t, "evildeps", map[string]string{
				"package.json":   `{"dependencies":{"evil":"file:evil-1.0.0.tgz"}}`,
				"evil-1.0.0.tgz": string(tgz),
				"main.js":        "console.log(JSON.stringify({evil: require('evil')}));\n",
			})
			flags := []string{"--env-cache", cache, "--npm-registry", "http://127.0.0.1:9/"}
			if scripts {
				flags = append(flags, "--allow-install-scripts")
			}
			r, res := m.depsRun(t, 0, sk, flags...)
			if !strings.Contains(string(r.Output), `"evil":1`) || r.Environment == nil {
				t.Fatalf("the skill must load its local package\n%s", res)
			}
			found, _ := filepath.Glob(filepath.Join(cache, "envs", r.Environment.Key, "node", "node_modules", "evil", "result.json"))
			if !scripts {
				if len(found) != 0 {
					t.Errorf("install script ran without --allow-install-scripts")
				}
				continue
			}
			if len(found) != 1 {
				t.Fatalf("the opted-in install script did not run (no result.json)\n%s", res)
			}
			b, _ := os.ReadFile(found[0])
			if strings.Contains(string(b), "canary-5d1e") {
				t.Errorf("the install script read the host canary: %s", b)
			}
			t.Logf("install script saw: %s", b)
		}
		if n := reached.Load(); n != 0 {
			t.Errorf("the host listener was reached %d times", n)
		}
		if _, err := os.Stat(escape); err == nil {
			t.Errorf("the install script created %s on the host", escape)
		}
	})
}

// addSdist puts a source distribution of package name on the index: its
// setup.py tries to read a host file, write a host file and reach a host
// listener, and bakes what it managed into the package.
func (ix *pyIndex) addEvilSdist(t *testing.T, name, canary, escape string, port int) {
	setup := fmt.Sprintf(`import json, os, socket
from setuptools import setup
out = {"ran": True}
try:
    out["canary"] = open(%q).read()
except Exception as e:
    out["canary_err"] = type(e).__name__
try:
    open(%q, "w").write("escaped")
    out["wrote"] = True
except Exception as e:
    out["write_err"] = type(e).__name__
try:
    socket.create_connection(("127.0.0.1", %d), 3).close()
    out["direct"] = True
except Exception as e:
    out["direct_err"] = type(e).__name__
os.makedirs(%q, exist_ok=True)
with open(os.path.join(%q, "__init__.py"), "w") as f:
    f.write("RESULT = %%r\n" %% json.dumps(out))
setup(name=%q, version="1.0.0", packages=[%q])
`, canary, escape, port, name, name, name, name)
	root := name + "-1.0.0/"
	files := map[string]string{
		root + "PKG-INFO": fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: 1.0.0\n", name),
		root + "setup.py": setup,
	}
	d := filepath.Join(ix.dir, "simple", name)
	os.MkdirAll(d, 0o755)
	if err := os.WriteFile(filepath.Join(d, name+"-1.0.0.tar.gz"), targz(files), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDepsSourceBuildContained: a source distribution is refused by
// default (binary wheels only: its setup.py never runs); opted in, its
// setup.py runs in the build sandbox, and the host proves it read no host
// file, created none and reached no host listener.
func TestDepsSourceBuildContained(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		tr := newTraps(t, "canary-93be")
		canary, escape, reached := tr.canary, tr.escape, &tr.reached
		ix := newPyIndex(t)
		ix.addEvilSdist(t, "evilpkg", canary, escape, tr.port)
		cache := envCache(t, m)
		sk := depsSkill(t, "srcdeps", map[string]string{"requirements.txt": "evilpkg==1.0.0\n",
			"main.py": "import json, evilpkg\nprint(json.dumps({'result': evilpkg.RESULT}))\n"})
		flags := []string{"--env-cache", cache, "--pip-index-url", ix.url()}
		_, res := m.depsRun(t, 1, sk, flags...)
		if !strings.Contains(res.stderr, "build failed") {
			t.Fatalf("a source-only package must fail the default (binary-only) build\n%s", res)
		}
		if envs, _ := os.ReadDir(filepath.Join(cache, "envs")); len(envs) != 0 {
			t.Errorf("a failed build left an environment")
		}
		r, res := m.depsRun(t, 0, sk, append(flags, "--allow-source-builds")...)
		if !strings.Contains(string(r.Output), `\"ran\": true`) {
			t.Fatalf("the opted-in setup.py did not run\n%s", res)
		}
		t.Logf("setup.py saw: %s", r.Output)
		if reached.Load() != 0 {
			t.Errorf("the host listener was reached %d times", reached.Load())
		}
		if _, err := os.Stat(escape); err == nil {
			t.Errorf("setup.py created %s on the host", escape)
		}
		hit := false
		filepath.WalkDir(filepath.Join(cache, "envs"), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("canary-93be")) {
					hit = true
				}
			}
			return nil
		})
		if hit || strings.Contains(string(r.Output), "canary-93be") {
			t.Errorf("the host canary reached the environment")
		}
	})
}

// npmStub is an npm registry on loopback that knows one package, marked,
// at version 1.0.0 only (its packument; no tarball is ever fetched).
func npmStub(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.TrimPrefix(r.URL.Path, "/") != "marked" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"name":"marked","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":{"name":"marked","version":"1.0.0","dist":{"tarball":"http://%s/marked/-/marked-1.0.0.tgz","shasum":"0000000000000000000000000000000000000000"}}}}`, r.Host)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// TestDepsBuildErrorLines: the one line a person sees when a dependency
// build fails names the cause from the package manager's own output
// (golden, with patterns for the variable parts and for npm's advice,
// whose wording varies by npm version): npm's "No matching version
// found", not its pointer to a log inside the gone sandbox; pip's hash
// mismatch with the requirement and both sums, not only its "Got ..."
// line. The skill is named once; the build's whole log is kept where the
// line says.
func TestDepsBuildErrorLines(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		// check asserts stderr is want (a pattern) and the pointed-to log
		// holds the cause.
		check := func(t *testing.T, res result, cache, want, inLog string) {
			t.Helper()
			re := regexp.MustCompile(`^skillrun: ` + want + ` \(log: (` + regexp.QuoteMeta(cache) + `/logs/[0-9a-f]{64}\.log)\)\n$`)
			mt := re.FindStringSubmatch(res.stderr)
			if mt == nil {
				t.Fatalf("stderr:\n%q\nwant (pattern):\n%q", res.stderr, re.String())
			}
			if b, err := os.ReadFile(mt[1]); err != nil || !strings.Contains(string(b), inLog) {
				t.Errorf("the kept build log %s lacks %q: %v", mt[1], inLog, err)
			}
		}
		t.Run("npm", func(t *testing.T) {
			cache := envCache(t, m)
			sk := depsSkill(t, "npmfail", map[string]string{
				"package.json": `{"name":"npmfail","version":"1.0.0","dependencies":{"marked":"999.0.0"}}`,
				"main.js":      "console.log('{}')\n",
			})
			_, res := m.depsRun(t, 1, sk, "--env-cache", cache, "--npm-registry", npmStub(t))
			check(t, res, cache, `skill "npmfail": dependencies: build failed \(exit status 1\): `+
				`notarget No matching version found for marked@999\.0\.0\.; notarget [^;/]+`, "No matching version found for marked@999.0.0")
		})
		t.Run("pip", func(t *testing.T) {
			ix := newPyIndex(t)
			ix.addWheel(t, "skilltestpkg", "1.0.0", "def answer():\n    return 42\n")
			whl, err := os.ReadFile(filepath.Join(ix.dir, "simple", "skilltestpkg", wheelName("skilltestpkg", "1.0.0")))
			if err != nil {
				t.Fatal(err)
			}
			got := sha256.Sum256(whl)
			cache := envCache(t, m)
			sk := depsSkill(t, "pipfail", map[string]string{
				"requirements.txt": "skilltestpkg==1.0.0 --hash=sha256:" + strings.Repeat("0", 64) + "\n",
				"main.py":          pyMain,
			})
			_, res := m.depsRun(t, 1, sk, "--env-cache", cache, "--pip-index-url", ix.url())
			check(t, res, cache, `skill "pipfail": dependencies: build failed \(exit status 1\): `+
				`ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE\..*?; `+
				`skilltestpkg==1\.0\.0 from http://[^;]*/skilltestpkg-1\.0\.0-py3-none-any\.whl[^;]*; `+
				`Expected sha256 0{64}; Got `+fmt.Sprintf("%x", got), fmt.Sprintf("%x", got))
		})
	})
}
