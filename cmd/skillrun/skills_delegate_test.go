//go:build runtimeonly

package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/skillrun/skillrun/runtime"
)

// TestDelegateSkills: skillrun (runtimeonly) carries out skill, sandbox and
// mcp by exec'ing skillrun-skills with the whole command line; without it,
// one line that names it (exit 1), and --help still describes the verb.
func TestDelegateSkills(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, args := range [][]string{{"skill", "run", "dir"}, {"sandbox", "--", "true"}, {"mcp", "serve", "dir"}} {
		r, calls := callRecording(t, args...)
		if r.code != 1 || len(calls) != 0 || !strings.Contains(r.stderr, "skillrun-skills") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%v, none installed: %+v, %v", args, r, calls)
		}
		r, _ = callRecording(t, args[0], "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "skillrun "+args[0]+" - ") || !strings.Contains(r.stdout, "skillrun-skills") {
			t.Errorf("%s --help, none installed: %+v", args[0], r)
		}
	}
	bin := companionInPath(t, skillsBinary)
	for _, args := range [][]string{
		{"skill", "run", "--input", "{}", "dir"},
		{"--log-format", "json", "--root=/r", "--debug", "sandbox", "--network", "none", "--", "sh", "-c", "true"},
		{"mcp", "serve", "--pool", "2", "dir"},
		{"skill", "--help"},
	} {
		r, calls := callRecording(t, args...)
		want := []execCall{{bin, append([]string{"skillrun"}, args...)}}
		if !reflect.DeepEqual(calls, want) || r.code != 126 {
			t.Errorf("%v: %+v, %v; want %v", args, r, calls, want)
		}
	}
}

// TestEgressHelperIsSkills: the runtime's egress server of an annotated
// bundle is skillrun-skills (this binary links none).
func TestEgressHelperIsSkills(t *testing.T) {
	o := withEgressHelper(runtime.Options{})
	t.Setenv("PATH", t.TempDir())
	if _, err := o.EgressHelper(); err == nil || !strings.Contains(err.Error(), "skillrun-skills") {
		t.Errorf("none installed: %v", err)
	}
	bin := companionInPath(t, skillsBinary)
	if got, err := o.EgressHelper(); err != nil || got != bin {
		t.Errorf("EgressHelper() = %q, %v; want %q", got, err, bin)
	}
}
