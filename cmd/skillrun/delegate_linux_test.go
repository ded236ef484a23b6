//go:build linux && cgo && runtimeonly

package main

import (
	"sort"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestCompanionVerbMatchesApp: the C constructor (delegate_linux.go) finds
// the verb where the app does, for every global flag of the app in each of
// its forms, and stops (Go's to answer) at help, version, an unknown flag
// and a missing value. A global flag added to app.go and not to the C
// lists fails here.
func TestCompanionVerbMatchesApp(t *testing.T) {
	app := (&env{}).newApp()
	var value, boolean []string
	for _, f := range app.Flags {
		name := f.Names()[0]
		if name == "help" || name == "version" {
			continue
		}
		if _, ok := f.(*cli.BoolFlag); ok {
			boolean = append(boolean, name)
		} else {
			value = append(value, name)
		}
	}
	sort.Strings(value)
	sort.Strings(boolean)
	if strings.Join(value, " ") != "log log-format root rootless" || strings.Join(boolean, " ") != "debug systemd-cgroup" {
		t.Fatalf("the app's global flags are now %v and %v: update skillrun_value_flags and skillrun_bool_flags in delegate_linux.go, and this test", value, boolean)
	}
	var cases [][]string
	for _, n := range value {
		cases = append(cases, []string{"--" + n, "v"}, []string{"-" + n, "v"}, []string{"--" + n + "=v"})
	}
	for _, n := range boolean {
		cases = append(cases, []string{"--" + n}, []string{"-" + n}, []string{"--" + n + "=false"})
	}
	cases = append(cases, nil, []string{"--root", "/r", "--debug", "--log-format=json", "--log", "/l"})
	for _, verb := range []string{"skill", "sandbox", "mcp", "openshell-driver", "run", "state"} {
		for _, flags := range cases {
			args := append(append([]string{"skillrun"}, flags...), verb, "x")
			want := skipFlags(app.Flags, args, 1)
			bin, got := companionVerb(args)
			if got != want {
				t.Errorf("%q: C finds the verb at %d, the app at %d", args, got, want)
			}
			wantBin := map[string]string{"skill": skillsBinary, "sandbox": skillsBinary, "mcp": skillsBinary, "openshell-driver": openshellBinary}[verb]
			if bin != wantBin {
				t.Errorf("%q: C would exec %q, want %q", args, bin, wantBin)
			}
		}
	}
	if _, v := companionVerb([]string{"skillrun", "--root", "/r", "help", "skill"}); v != 3 {
		t.Errorf("help skill: the verb at %d, want 3 (the constructor then execs the companion for help of skill)", v)
	}
	for _, args := range [][]string{
		{"skillrun"}, {"skillrun", "--help", "skill"}, {"skillrun", "-v"}, {"skillrun", "--bogus", "skill"},
		{"skillrun", "--root"}, {"skillrun", "--", "skill"}, {"skillrun", "-", "skill"},
	} {
		if bin, v := companionVerb(args); v != -1 || bin != "" {
			t.Errorf("%q: C decides %q at %d, want Go's to answer", args, bin, v)
		}
	}
}
