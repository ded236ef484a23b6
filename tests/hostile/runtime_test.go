//go:build integration

package hostile_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// badIDs are container IDs no verb may accept; want is what the one error
// line must say.
var badIDs = []struct{ name, id, want string }{
	{"slash", "a/b", "invalid container ID"},
	{"dotdot", "..", "invalid container ID"},
	{"dot", ".", "invalid container ID"},
	{"traversal", "../escape", "invalid container ID"},
	{"absolute", "/tmp/escape", "invalid container ID"},
	{"1KiB", strings.Repeat("a", 1024), "invalid container ID"},
	{"unicode", "ünïcødé-☃", "invalid container ID"},
	{"newline", "a\nb", "invalid container ID"},
	{"space", "a b", "invalid container ID"},
	{"empty", "", "invalid container ID"},
	{"control char", "a\x1bb", "invalid container ID"},
}

// idVerbs are invocations of every verb that takes a container ID.
func idVerbs(bundle, id string) [][]string {
	return [][]string{
		{"create", "--bundle", bundle, id},
		{"run", "--bundle", bundle, id},
		{"start", id},
		{"state", id},
		{"kill", id, "KILL"},
		{"kill", "--all", id, "9"},
		{"delete", id},
		{"delete", "--force", id},
		{"pause", id},
		{"resume", id},
		{"ps", "--format", "json", id},
		{"exec", id, "true"},
		{"events", "--stats", id},
		{"update", "--pids-limit", "10", id},
	}
}

// TestHostileIDs gives every verb each bad ID: exit 1, one line saying the
// ID is invalid, and nothing made in or next to the state root.
func TestHostileIDs(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, m *mode) {
		bundle := m.newBundle(t, "bundle", nil, "sleep", "100")
		for _, c := range badIDs {
			t.Run(c.name, func(t *testing.T) {
				for _, args := range idVerbs(bundle, c.id) {
					res := m.run(t, opts{stdin: strings.NewReader("")}, args...)
					code := 1
					if args[0] == "exec" {
						code = 255 // runc: every exec failure
					}
					wantError(t, res, code, c.want)
				}
				for _, escape := range []string{filepath.Join(m.dir, "escape"), "/tmp/escape", filepath.Join(m.root, "a")} {
					if _, err := os.Lstat(escape); err == nil {
						t.Errorf("bad ID %q made %s", c.id, escape)
						os.RemoveAll(escape)
					}
				}
				m.assertClean(t, nil)
			})
		}
		// A valid alphabet but longer than a file name may be: refused
		// cleanly, nothing half-made.
		t.Run("300 bytes", func(t *testing.T) {
			id := strings.Repeat("b", 300)
			m.track(t, id)
			for _, args := range [][]string{{"create", "--bundle", bundle, id}, {"run", "--bundle", bundle, id}} {
				res := m.run(t, opts{stdin: strings.NewReader("")}, args...)
				wantError(t, res, 1, "long")
			}
			m.assertClean(t, []string{id})
		})
	})
}

// TestNULInArguments documents that a NUL byte cannot reach skillrun
// through its arguments (execve takes C strings: Go refuses such an
// argument before exec), and checks the places where NUL can reach it
// inside JSON: an exec --process file (config.json is in
// TestHostileConfig) and the skill input (TestHostileSkillInput).
func TestNULInArguments(t *testing.T) {
	requireSetup(t)
	err := exec.Command(binary, "state", "a\x00b").Run()
	if err == nil || !strings.Contains(err.Error(), "invalid argument") {
		t.Errorf("an argument with NUL was passed to skillrun (err %v): the ID cases must cover it", err)
	}
	err = exec.Command(binary, "skill", "run", "--input", "{\"a\":\"\x00\"}", example("text-stats")).Run()
	if err == nil || !strings.Contains(err.Error(), "invalid argument") {
		t.Errorf("an --input with NUL was passed to skillrun (err %v)", err)
	}
}

// TestHostileLifecycle: duplicate create and run, start twice, delete of a
// running container without --force, unknown signals, an exec --process
// with NUL bytes: each refused with exit 1 and one line, the container
// undisturbed, and everything gone after the forced delete.
func TestHostileLifecycle(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, m *mode) {
		bundle := m.newBundle(t, "bundle", nil, "sleep", "1000")
		id := uniqueID(t)
		m.track(t, id)
		if res := m.run(t, opts{}, "create", "--bundle", bundle, id); res.code != 0 {
			t.Fatalf("create\n%s", res)
		}
		st := m.state(t, id)
		pid := st["pid"]
		for _, args := range [][]string{{"create", "--bundle", bundle, id}, {"run", "--bundle", bundle, id}, {"run", "-d", "--bundle", bundle, id}} {
			wantError(t, m.run(t, opts{}, args...), 1, "container with given ID already exists")
		}
		if st := m.state(t, id); st["status"] != "created" || st["pid"] != pid {
			t.Fatalf("duplicate create disturbed the container: %v (pid was %v)", st, pid)
		}
		if res := m.run(t, opts{}, "start", id); res.code != 0 {
			t.Fatalf("start\n%s", res)
		}
		m.waitStatus(t, id, "running")
		wantError(t, m.run(t, opts{}, "start", id), 1, "running")
		wantError(t, m.run(t, opts{}, "delete", id), 1, "running")
		// 0 is a valid signal (the init exists), as for runc and kill(2).
		for _, sig := range []string{"FOO", "SIGFOO", "999", "65", "-1", "KILL ", "SIG", "1e3", "0x9", strings.Repeat("K", 4096)} {
			wantError(t, m.run(t, opts{}, "kill", id, sig), 1, "signal")
			wantError(t, m.run(t, opts{}, "kill", "--all", id, sig), 1, "signal")
		}
		proc := filepath.Join(m.dir, "process.json")
		m.writeFile(t, proc, []byte(`{"args":["sh\u0000-c","true"],"cwd":"/","env":["A=\u0000"]}`))
		res := m.run(t, opts{}, "exec", "--process", proc, id)
		wantError(t, res, 255)
		m.writeFile(t, proc, []byte(`{"args":["true"],"cwd":"/\u0000"}`))
		wantError(t, m.run(t, opts{}, "exec", "--process", proc, id), 255)
		m.writeFile(t, proc, []byte(`{"args":`+strings.Repeat("[", 100000)))
		wantError(t, m.run(t, opts{}, "exec", "--process", proc, id), 255, "process")
		if st := m.state(t, id); st["status"] != "running" || st["pid"] != pid {
			t.Fatalf("hostile calls disturbed the container: %v (pid was %v)", st, pid)
		}
		if res := m.run(t, opts{}, "delete", "--force", id); res.code != 0 {
			t.Fatalf("delete --force\n%s", res)
		}
		wantError(t, m.run(t, opts{}, "delete", id), 1, "container does not exist")
		m.assertClean(t, []string{id})
	})
}

// TestStartStopped: start of a stopped container is refused, the process
// does not run twice.
func TestStartStopped(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, m *mode) {
		bundle := m.newBundle(t, "bundle", nil, "true")
		id := uniqueID(t)
		m.track(t, id)
		if res := m.run(t, opts{}, "create", "--bundle", bundle, id); res.code != 0 {
			t.Fatalf("create\n%s", res)
		}
		if res := m.run(t, opts{}, "start", id); res.code != 0 {
			t.Fatalf("start\n%s", res)
		}
		m.waitStatus(t, id, "stopped")
		wantError(t, m.run(t, opts{}, "start", id), 1, "stopped")
		if res := m.run(t, opts{}, "delete", id); res.code != 0 {
			t.Fatalf("delete of a stopped container\n%s", res)
		}
		m.assertClean(t, []string{id})
	})
}
