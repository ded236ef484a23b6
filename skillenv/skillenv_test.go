package skillenv

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/spec"
)

func TestParsePipReport(t *testing.T) {
	rep := `{"version":"1","install":[
	 {"download_info":{"url":"http://x/b-2.0-py3-none-any.whl","archive_info":{"hash":"sha256=bb","hashes":{"sha256":"bb"}}},"metadata":{"name":"b","version":"2.0"}},
	 {"download_info":{"url":"http://x/a-1.0-py3-none-any.whl","archive_info":{"hash":"sha256=aa"}},"metadata":{"name":"a","version":"1.0"}}]}`
	pkgs, lock, err := parsePipReport([]byte(rep))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(pkgs, ",") != "a==1.0,b==2.0" {
		t.Errorf("packages %v", pkgs)
	}
	if strings.Join(lock, "|") != "a==1.0 --hash=sha256:aa|b==2.0 --hash=sha256:bb" {
		t.Errorf("lock %v", lock)
	}
	if _, _, err := parsePipReport([]byte(`{"install":[{"download_info":{"url":"file:///x"},"metadata":{"name":"a","version":"1"}}]}`)); err == nil {
		t.Error("a distribution without a sha256 must be refused: the lock would not pin it")
	}
	if _, _, err := parsePipReport([]byte(`{`)); err == nil {
		t.Error("bad JSON accepted")
	}
}

func TestParseNpmLock(t *testing.T) {
	lock := `{"lockfileVersion":3,"packages":{"":{"name":"x","dependencies":{"a":"1"}},
	 "node_modules/a":{"version":"1.0.0"},"node_modules/@s/b":{"version":"2.0.0"},"node_modules/a/node_modules/c":{"version":"3.0.0"}}}`
	got, err := parseNpmLock([]byte(lock))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "@s/b@2.0.0,a@1.0.0,c@3.0.0" {
		t.Errorf("got %v", got)
	}
}

func TestAccess(t *testing.T) {
	ctx := context.Background()
	look := func(addrs ...string) func(context.Context, string) ([]netip.Addr, error) {
		return func(context.Context, string) ([]netip.Addr, error) {
			var out []netip.Addr
			for _, a := range addrs {
				out = append(out, netip.MustParseAddr(a))
			}
			return out, nil
		}
	}
	a, err := access(ctx, "http://127.0.0.1:8080/simple/", "pypi.index.skillrun.internal", look())
	if err != nil {
		t.Fatal(err)
	}
	if a.URL != "http://pypi.index.skillrun.internal:8080/simple/" || a.Allow != "pypi.index.skillrun.internal:8080" ||
		a.Resolve != "pypi.index.skillrun.internal:8080:127.0.0.1" || a.Insecure != a.Allow {
		t.Errorf("loopback index: %+v", a)
	}
	if a, err = access(ctx, "http://localhost/simple", "s.internal", look()); err != nil || a.Resolve != "s.internal:80:127.0.0.1" {
		t.Errorf("localhost: %+v %v", a, err)
	}
	if a, err = access(ctx, "https://pypi.org/simple/", "s", look("151.101.0.223")); err != nil || a.Resolve != "" || a.Allow != "pypi.org:443" || a.Insecure != "" {
		t.Errorf("public index: %+v %v", a, err)
	}
	// A name the host resolves to no public address is pinned to it.
	if a, err = access(ctx, "https://registry.npmjs.org/", "s", look("203.0.113.80")); err != nil || a.Resolve != "registry.npmjs.org:443:203.0.113.80" {
		t.Errorf("private index address: %+v %v", a, err)
	}
	for _, bad := range []string{"ftp://x/", "https://127.0.0.1/simple", "https://u:p@pypi.org/simple", "http:///x", "http://x:0/"} {
		if _, err := access(ctx, bad, "s", look("1.1.1.1")); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if _, err := access(ctx, "https://gone.test/", "s", func(context.Context, string) ([]netip.Addr, error) { return nil, errors.New("nxdomain") }); err == nil {
		t.Error("an unresolvable index was accepted")
	}
}

func TestSealDigestVerify(t *testing.T) {
	c := Cache{Dir: t.TempDir()}
	if err := c.init(); err != nil {
		t.Fatal(err)
	}
	staging := filepath.Join(c.Dir, "build", "k-1")
	os.MkdirAll(filepath.Join(staging, "a", "b"), 0o777)
	os.WriteFile(filepath.Join(staging, "a", "b", "f.py"), []byte("x = 1\n"), 0o666)
	os.WriteFile(filepath.Join(staging, "a", "tool"), []byte("#!/bin/sh\n"), 0o4777)
	os.Symlink("/usr/bin/python3", filepath.Join(staging, "a", "py"))
	if err := c.install(staging, &Marker{Key: "k"}); err != nil {
		t.Fatal(err)
	}
	env := c.EnvDir("k")
	if fi, _ := os.Stat(filepath.Join(env, "a", "tool")); fi.Mode().Perm() != 0o555 || fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("executable sealed as %v", fi.Mode())
	}
	if fi, _ := os.Stat(filepath.Join(env, "a", "b")); fi.Mode().Perm() != 0o555 {
		t.Errorf("folder sealed as %v", fi.Mode())
	}
	if _, err := c.Verify("k"); err != nil {
		t.Fatalf("fresh environment does not verify: %v", err)
	}
	f := filepath.Join(env, "a", "b", "f.py")
	os.Chmod(filepath.Dir(f), 0o755)
	os.Chmod(f, 0o644)
	os.WriteFile(f, []byte("x = 2\n"), 0o644)
	os.Chmod(f, 0o444)
	os.Chmod(filepath.Dir(f), 0o555)
	if _, err := c.Verify("k"); err == nil {
		t.Error("a changed file verified")
	}
	// A FIFO from a build is refused.
	staging2 := filepath.Join(c.Dir, "build", "k2-1")
	os.MkdirAll(staging2, 0o755)
	if err := syscall.Mkfifo(filepath.Join(staging2, "p"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.install(staging2, &Marker{Key: "k2"}); err == nil || !strings.Contains(err.Error(), "only files, folders and symlinks") {
		t.Errorf("FIFO accepted: %v", err)
	}
	if _, err := c.readMarker("k2"); err == nil {
		t.Error("a refused build has a marker")
	}
}

func TestCollect(t *testing.T) {
	c := Cache{Dir: t.TempDir()}
	if err := c.init(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"old", "kept", "busy"} {
		s := filepath.Join(c.Dir, "build", k+"-x")
		os.MkdirAll(filepath.Join(s, "d"), 0o755)
		if err := c.install(s, &Marker{Key: k}); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(c.Dir, "build", "dead-1", "x"), 0o755) // a build that died
	l, err := c.openLock("busy")
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	if err := l.lock(unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	out, err := c.Collect(0, map[string]bool{"kept": true})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(out.Removed, ",") != "old" || strings.Join(out.InUse, ",") != "busy" || strings.Join(out.Kept, ",") != "kept" {
		t.Errorf("collected %+v", out)
	}
	for k, want := range map[string]bool{"old": false, "kept": true, "busy": true} {
		if _, err := os.Stat(c.EnvDir(k)); (err == nil) != want {
			t.Errorf("%s present=%v, want %v", k, err == nil, want)
		}
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "build", "dead-1")); err == nil {
		t.Error("a dead build's staging folder was kept")
	}
}

func writeSkill(t *testing.T, files map[string]string) *spec.Skill {
	dir := filepath.Join(t.TempDir(), "s")
	files["SKILL.md"] = "---\nname: s\ndescription: d\n---\n"
	files["main.py"] = "print(1)\n"
	for k, v := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, k)), 0o755)
		os.WriteFile(filepath.Join(dir, k), []byte(v), 0o644)
	}
	sk, err := spec.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return sk
}

func TestPlanKey(t *testing.T) {
	if _, err := lookInterpreter("python3"); err != nil {
		t.Skipf("skipped: %v", err)
	}
	a := writeSkill(t, map[string]string{"requirements.txt": "x==1\n"})
	b := writeSkill(t, map[string]string{"requirements.txt": "# a comment\n  x==1  \n"})
	c := writeSkill(t, map[string]string{"requirements.txt": "x==2\n"})
	none := writeSkill(t, map[string]string{})
	key := func(sk *spec.Skill, pol Policy) string {
		p, err := PlanFor(sk, pol)
		if err != nil {
			t.Fatal(err)
		}
		if p == nil {
			return ""
		}
		return p.Key
	}
	if key(a, Policy{}) != key(b, Policy{}) {
		t.Error("comments and white space changed the key")
	}
	if key(a, Policy{}) == key(c, Policy{}) {
		t.Error("another version kept the key")
	}
	if key(a, Policy{}) == key(a, Policy{SourceBuilds: true}) {
		t.Error("the install policy is not in the key")
	}
	if key(none, Policy{}) != "" {
		t.Error("a skill without dependencies has a plan")
	}
	p, _ := PlanFor(a, Policy{})
	if !strings.HasPrefix(p.Python.Name, "python3.") {
		t.Errorf("python name %q", p.Python.Name)
	}
}

// BenchmarkAcquireHit is what a run of a prepared skill pays for its
// environment: the plan (interpreter stat, declaration hash), the shared
// lock and the marker read.
func BenchmarkAcquireHit(b *testing.B) {
	if _, err := lookInterpreter("python3"); err != nil {
		b.Skipf("skipped: %v", err)
	}
	dir := filepath.Join(b.TempDir(), "s")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: s\ndescription: d\n---\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.py"), []byte("print(1)\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "requirements.txt"), []byte("x==1\n"), 0o644)
	sk, err := spec.Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	m := &Manager{Cache: Cache{Dir: b.TempDir()}}
	plan, err := PlanFor(sk, m.Policy)
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Cache.init(); err != nil {
		b.Fatal(err)
	}
	staging := filepath.Join(m.Cache.Dir, "build", plan.Key+"-x")
	os.MkdirAll(filepath.Join(staging, "python"), 0o755)
	if err := m.Cache.install(staging, &Marker{Key: plan.Key, PythonName: plan.Python.Name, Python: []string{"x==1"}}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		env, _, release, err := m.Acquire(ctx, sk)
		if err != nil || env == nil {
			b.Fatal(err)
		}
		release()
	}
}
