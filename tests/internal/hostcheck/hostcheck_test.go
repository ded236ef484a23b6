//go:build linux

package hostcheck

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
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
	// Until the child has exec'd, its command line is still this test's.
	got := ProcsWithArg([]string{marker})
	for deadline := time.Now().Add(5 * time.Second); len(got) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		got = ProcsWithArg([]string{marker})
	}
	if len(got) != 1 {
		t.Errorf("ProcsWithArg(%q) = %v, want the one sleep started (pid %d)", marker, got, cmd.Process.Pid)
	}
	if got := ProcsWithArg([]string{"marker-" + strings.Repeat("z", 8)}); len(got) != 0 {
		t.Errorf("a substring matched: %v", got)
	}
}

// TestStage: what nobody cannot reach (a folder mode 0700) is copied where
// it can, checked as nobody by the kernel; what it reaches is used as is;
// Remove deletes the copies.
func TestStage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root (runs runuser -u nobody)")
	}
	if _, err := exec.LookPath("runuser"); err != nil {
		t.Skipf("skipped: %v", err)
	}
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skipf("skipped: no user nobody: %v", err)
	}
	// t.TempDir's own parent is 0700: the stage goes beside it.
	base, err := os.MkdirTemp("", "stage-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(StageDirEnv, base)
	closed := t.TempDir() // 0700
	bin := filepath.Join(closed, "skillrun")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho staged\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	skill := filepath.Join(closed, "examples", "skills", "x")
	if err := os.MkdirAll(filepath.Join(skill, "scripts"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{"SKILL.md": 0o600, "scripts/main.py": 0o700} {
		if err := os.WriteFile(filepath.Join(skill, name), []byte(name), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := CanExec("nobody", bin); err == nil {
		t.Fatalf("nobody can execute %s in a 0700 folder", bin)
	}
	var s Stage
	defer s.Remove()
	c, err := s.Exec("nobody", bin)
	if err != nil {
		t.Fatal(err)
	}
	if c == bin || filepath.Base(c) != "skillrun" || !strings.HasPrefix(c, base+"/") {
		t.Errorf("copy of %s: %s", bin, c)
	}
	if out, err := exec.Command("runuser", "-u", "nobody", "--", c).CombinedOutput(); err != nil || string(out) != "staged\n" {
		t.Errorf("nobody runs the copy: %q %v", out, err)
	}
	if again, _ := s.Exec("nobody", bin); again != c {
		t.Errorf("second Exec copied again: %s, then %s", c, again)
	}
	data, err := s.Read("nobody", closed, "examples")
	if err != nil {
		t.Fatal(err)
	}
	if err := CanRead("nobody", filepath.Join(data, "examples")); err != nil {
		t.Error(err)
	}
	if fi, err := os.Stat(filepath.Join(data, "examples", "skills", "x", "scripts", "main.py")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("copied script: %v %v", fi, err)
	}
	for _, reach := range []string{"/bin/sh", "/usr/bin/env"} {
		if got, err := s.Exec("nobody", reach); got != reach || err != nil {
			t.Errorf("Exec(%s) = %s, %v: want it as is", reach, got, err)
		}
	}
	top := s.Dir()
	s.Remove()
	if _, err := os.Stat(top); err == nil {
		t.Errorf("%s left after Remove", top)
	}
	// A stage folder the user cannot enter is an error that says so.
	if err := os.Chmod(base, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec("nobody", bin); err == nil || !strings.Contains(err.Error(), StageDirEnv) {
		t.Errorf("stage in a closed folder: %v", err)
	}
}

// TestNetnsHolders: a process in a network namespace of its own holds it;
// with marks, only when its command line carries one of them (another
// suite's sandbox can be given a freed namespace's number).
func TestNetnsHolders(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: making a network namespace needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skipf("skipped: no unshare(1): %v", err)
	}
	// A command line no other process has: sleep's seconds.
	marker := strconv.Itoa(400000 + int(time.Now().UnixNano()%100000))
	cmd := exec.Command(unshare, "--net", "--", "sleep", marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var ns string
	for deadline := time.Now().Add(5 * time.Second); ns == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline")
		if l := Netns(cmd.Process.Pid); strings.HasPrefix(string(b), "sleep\x00") && l != "" && l != Netns(os.Getpid()) {
			ns = l
		}
	}
	if ns == "" {
		t.Fatal("control: the process never ran sleep in a network namespace of its own")
	}
	set := map[string]bool{ns: true}
	if got := NetnsHolders(set); len(got) != 1 || !strings.Contains(got[0], "sleep "+marker) {
		t.Errorf("without marks: %v, want the one sleep", got)
	}
	if got := NetnsHolders(set, "x", marker); len(got) != 1 {
		t.Errorf("with a mark its command line carries: %v, want the one sleep", got)
	}
	if got := NetnsHolders(set, marker+"0"); len(got) != 0 {
		t.Errorf("with a mark it does not carry: %v, want none", got)
	}
}
