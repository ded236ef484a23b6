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
