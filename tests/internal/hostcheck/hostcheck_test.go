//go:build linux

package hostcheck

import (
	"os/exec"
	"strings"
	"testing"
)

func TestArgMatches(t *testing.T) {
	for _, c := range []struct {
		args    []string
		needles []string
		want    bool
	}{
		{[]string{"skillrun", "create", "a b"}, []string{"a b"}, true},
		{[]string{"bash", "-c", "x=1; echo a b c"}, []string{"a b"}, false},
		{[]string{"sleep", "1000"}, []string{"1"}, false},
		{[]string{"skillrun", "run", "--bundle", "/tmp/b1/x"}, []string{"/tmp/b1"}, true},
		{[]string{"skillrun", "run", "--bundle=/tmp/b1"}, []string{"/tmp/b1"}, true},
		{[]string{"skillrun", "run", "/tmp/b10"}, []string{"/tmp/b1"}, false},
		{[]string{"skillrun", "run", "x"}, []string{""}, false},
	} {
		if got := argMatches(c.args, c.needles); got != c.want {
			t.Errorf("argMatches(%q, %q) = %v, want %v", c.args, c.needles, got, c.want)
		}
	}
}

func TestProcsWithArg(t *testing.T) {
	marker := "hostcheck-marker-" + strings.Repeat("z", 8)
	// The marker is sleep's argv[0]: a process that never forks, so no
	// short-lived copy of it can be caught mid-fork.
	cmd := exec.Command("sleep", "30")
	cmd.Args[0] = marker
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if got := ProcsWithArg([]string{marker}); len(got) != 1 {
		t.Errorf("ProcsWithArg(%q) = %v, want the one sleep started (pid %d)", marker, got, cmd.Process.Pid)
	}
	if got := ProcsWithArg([]string{"marker-" + strings.Repeat("z", 8)}); len(got) != 0 {
		t.Errorf("a substring matched: %v", got)
	}
}
