package skillenv

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skillrun/skillrun/spec"
)

func TestNodeIndexURL(t *testing.T) {
	if url, synth := (&node{}).indexURL(); url != DefaultNpmRegistry || synth != "npm.index.skillrun.internal" {
		t.Errorf("default registry %q %q", url, synth)
	}
	if url, _ := (&node{index: Index{NpmRegistry: "http://localhost:4873/", PipIndexURL: "http://x/"}}).indexURL(); url != "http://localhost:4873/" {
		t.Errorf("operator's registry %q", url)
	}
}

// TestNodeStage: package.json of the dependencies, the skill's file:
// dependencies copied, npm install without scripts and without the
// operator's npm configuration.
func TestNodeStage(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "vendor"), 0o755)
	os.WriteFile(filepath.Join(dir, "vendor", "b.tgz"), []byte("tarball"), 0o644)
	deps := &spec.NodeDeps{Dependencies: map[string]string{"a": "1.0.0", "b": "file:vendor/b.tgz"}, LocalFiles: []string{"vendor/b.tgz"}}
	b := newBuild(t)
	nd := &node{plan: &NodePlan{Deps: deps, Dir: dir}}
	if err := nd.stage(b, testAccess(t, DefaultNpmRegistry, "s")); err != nil {
		t.Fatal(err)
	}
	want := []string{"echo '== npm install'", "cd /workspace/node",
		shellJoin([]string{"npm", "install", "--omit=dev", "--no-audit", "--no-fund", "--no-update-notifier",
			"--registry", "https://registry.npmjs.org:443/", "--cache", "/tmp/.npm", "--loglevel", "warn", "--ignore-scripts"}),
		"mkdir -p /workspace/node/node_modules"}
	if !slices.Equal(b.script, want) {
		t.Errorf("script\n%q\nwant\n%q", b.script, want)
	}
	if got := readFile(t, filepath.Join(b.staging, "node", "package.json")); got != string(deps.PackageJSON()) {
		t.Errorf("package.json %q", got)
	}
	if got := readFile(t, filepath.Join(b.staging, "node", "vendor", "b.tgz")); got != "tarball" {
		t.Errorf("file: dependency %q", got)
	}
	if _, err := os.Stat(filepath.Join(b.staging, "node", "package-lock.json")); err == nil {
		t.Error("a lock was staged without one")
	}
	if len(b.env) != 2 || b.env["npm_config_userconfig"] != "/tmp/.npmrc-user-none" || b.env["npm_config_globalconfig"] != "/tmp/.npmrc-global-none" {
		t.Errorf("env %v", b.env)
	}
	if !b.marker.Node {
		t.Error("marker does not say node")
	}
}

// TestNodeStageLock: a lock (here one an earlier build resolved) makes
// it npm ci; install scripts and the operator's CA as asked.
func TestNodeStageLock(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, []byte("CA\n"), 0o644)
	b := newBuild(t)
	os.WriteFile(b.resolvedPath("package-lock.json"), []byte(`{"lockfileVersion":3}`), 0o600)
	nd := &node{plan: &NodePlan{Deps: &spec.NodeDeps{Dependencies: map[string]string{"a": "1.0.0"}}, Dir: t.TempDir()},
		index: Index{NpmCAFile: ca}, policy: Policy{InstallScripts: true}}
	if err := nd.stage(b, testAccess(t, "http://localhost:4873/", "npm.index.skillrun.internal")); err != nil {
		t.Fatal(err)
	}
	if b.script[0] != "echo '== npm ci'" || !strings.HasPrefix(b.script[2], "'npm' 'ci' ") ||
		!strings.Contains(b.script[2], "'--registry' 'http://npm.index.skillrun.internal:4873/'") || strings.Contains(b.script[2], "--ignore-scripts") {
		t.Errorf("script %q", b.script)
	}
	if got := readFile(t, filepath.Join(b.staging, "node", "package-lock.json")); got != `{"lockfileVersion":3}` {
		t.Errorf("package-lock.json %q", got)
	}
	if b.env["NODE_EXTRA_CA_CERTS"] != "/workspace/.build/npm-ca.pem" || readFile(t, filepath.Join(b.staging, ".build", "npm-ca.pem")) != "CA\n" {
		t.Errorf("CA: env %v", b.env)
	}
}

// TestNodeCollect: npm's lock gives the marker's packages and is kept for
// later builds of the key (not when the skill ships its own).
func TestNodeCollect(t *testing.T) {
	lock := `{"lockfileVersion":3,"packages":{"":{"name":"skillrun-env"},"node_modules/a":{"version":"1.0.0"}}}`
	for _, shipped := range []bool{false, true} {
		b := newBuild(t)
		deps := &spec.NodeDeps{Dependencies: map[string]string{"a": "1.0.0"}}
		if shipped {
			deps.Lock = []byte(lock)
		}
		nd := &node{plan: &NodePlan{Deps: deps}}
		if err := nd.collect(b); err == nil || !strings.Contains(err.Error(), "npm left no package-lock.json") {
			t.Errorf("no lock: %v", err)
		}
		os.MkdirAll(filepath.Join(b.staging, "node"), 0o755)
		os.WriteFile(filepath.Join(b.staging, "node", "package-lock.json"), []byte(lock), 0o644)
		if err := nd.collect(b); err != nil {
			t.Fatal(err)
		}
		if strings.Join(b.marker.NodePackages, ",") != "a@1.0.0" {
			t.Errorf("marker %v", b.marker.NodePackages)
		}
		resolved, err := os.ReadFile(b.resolvedPath("package-lock.json"))
		if shipped != (err != nil) || (!shipped && string(resolved) != lock) {
			t.Errorf("shipped %v: resolved lock %q, %v", shipped, resolved, err)
		}
	}
}
