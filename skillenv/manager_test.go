package skillenv

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/skillrun/skillrun/spec"
)

// TestStageEcosystems: the manager grants each ecosystem's index (Python
// first) and closes the script; the ecosystems add their commands.
func TestStageEcosystems(t *testing.T) {
	m := &Manager{Index: Index{PipIndexURL: "http://127.0.0.1:3141/simple/"},
		lookup: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("10.0.0.7")}, nil
		}}
	plan := &Plan{
		Python: &PythonPlan{Deps: &spec.PythonDeps{Requirements: []string{"x==1"}}, Interpreter: Interpreter{Path: "/usr/bin/python3.11"}, Name: "python3.11"},
		Node:   &NodePlan{Deps: &spec.NodeDeps{Dependencies: map[string]string{"a": "1"}}, Dir: t.TempDir()},
	}
	ecos := m.ecosystems(plan)
	if len(ecos) != 2 {
		t.Fatalf("ecosystems %v", ecos)
	}
	if _, ok := ecos[0].(*python); !ok {
		t.Errorf("first ecosystem %T", ecos[0])
	}
	b := newBuild(t)
	b.script = []string{"set -eu"}
	opts, err := m.stage(context.Background(), ecos, b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(opts.AllowHosts, []string{"pypi.index.skillrun.internal:3141", "registry.npmjs.org:443"}) ||
		!slices.Equal(opts.Resolve, []string{"pypi.index.skillrun.internal:3141:127.0.0.1", "registry.npmjs.org:443:10.0.0.7"}) {
		t.Errorf("grants %v, resolve %v", opts.AllowHosts, opts.Resolve)
	}
	var echoes []string
	for _, l := range b.script {
		if strings.HasPrefix(l, "echo ") {
			echoes = append(echoes, l)
		}
	}
	if !slices.Equal(echoes, []string{"echo '== pip install'", "echo '== npm install'", "echo '== done'"}) || b.script[len(b.script)-2] != "rm -rf /workspace/.build" {
		t.Errorf("script %q", b.script)
	}
	if m.ecosystems(&Plan{}) != nil {
		t.Error("a plan without dependencies has ecosystems")
	}
}

// TestBuildCause: a failed build is reported by npm's or pip's own error
// lines, not npm's pointer to a log inside a sandbox that is gone.
func TestBuildCause(t *testing.T) {
	npm := `== npm ci
npm error code ETARGET
npm error notarget No matching version found for marked@999.0.0.
npm error notarget In most cases you or one of your dependencies are requesting
npm error A complete log of this run can be found in: /tmp/.npm/_logs/2026-11-25T10_00_00_000Z-debug-0.log`
	if got := buildCause(npm); got != "notarget No matching version found for marked@999.0.0.; notarget In most cases you or one of your dependencies are requesting" {
		t.Errorf("npm: %q", got)
	}
	pip := `Collecting tabulate==0.9.0
ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the package versions, please update the hashes. Otherwise, examine the package contents carefully; someone may have tampered with them.
    tabulate==0.9.0 from http://127.0.0.1:8080/simple/tabulate/tabulate-0.9.0-py3-none-any.whl:
        Expected sha256 00aa
             Got        d2f0`
	if got := buildCause(pip); !strings.Contains(got, "DO NOT MATCH THE HASHES") || !strings.HasSuffix(got, "; tabulate==0.9.0 from http://127.0.0.1:8080/simple/tabulate/tabulate-0.9.0-py3-none-any.whl:; Expected sha256 00aa; Got d2f0") {
		t.Errorf("pip: %q", got)
	}
	// npm 8 and older: "npm ERR!", the log's path on a line of its own.
	npm8 := `npm ERR! code E404
npm ERR! 404 Not Found - GET http://127.0.0.1:9/nosuchpkg - Not found
npm ERR! A complete log of this run can be found in:
npm ERR!     /tmp/.npm/_logs/2026-11-25T10_00_00_000Z-debug-0.log`
	if got := buildCause(npm8); got != "404 Not Found - GET http://127.0.0.1:9/nosuchpkg - Not found" {
		t.Errorf("npm 8: %q", got)
	}
	if got := buildCause("step 1\nsomething broke\n\n"); got != "something broke" {
		t.Errorf("fallback: %q", got)
	}
}
