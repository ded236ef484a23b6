//go:build integration

package hostile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/skillrun/skillrun/tests/internal/hostcheck"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// copyExample copies examples/skills/NAME into the mode's folder under a
// unique name (SKILL.md's name rewritten), so that its container IDs
// ("skill-NAME-RANDOM"), bundle folders and cgroups are recognisable.
func copyExample(t testing.TB, m *mode, name string) (dir, unique string) {
	t.Helper()
	unique = uniqueSkill(name)
	src := example(name)
	dir = filepath.Join(m.mkdir(t, "skills"), unique)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		dst := filepath.Join(dir, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == "SKILL.md" {
			data = regexp.MustCompile(`(?m)^name: .*$`).ReplaceAll(data, []byte("name: "+unique))
		}
		fi, _ := d.Info()
		return os.WriteFile(dst, data, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	m.chownTree(t, dir)
	return dir, unique
}

// skillIDs are the container-ID prefixes of runs of the named skills.
func skillIDs(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "skill-" + n + "-"
	}
	return out
}

// cgroupDirsPrefixed finds cgroup folders whose name starts with one of
// prefixes (unique per test).
func cgroupDirsPrefixed(prefixes []string) []string {
	return hostcheck.CgroupDirs(5, func(name string) bool {
		for _, pre := range prefixes {
			if strings.HasPrefix(name, pre) {
				return true
			}
		}
		return false
	})
}

// TestConcurrentSkillRuns: 50 skill runs at once, a mix of the examples
// with distinct inputs, each returns its own correct result, and nothing
// is left behind.
func TestConcurrentSkillRuns(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		type kind struct {
			example string
			input   func(i int) string
			want    func(i int) string
		}
		kinds := []kind{
			{"calculator", func(i int) string { return fmt.Sprintf(`{"expression": "%d * 7 + 1"}`, i) },
				func(i int) string { return fmt.Sprintf(`"result":%d`, i*7+1) }},
			{"text-stats", func(i int) string { return fmt.Sprintf(`{"text": %q}`, strings.Repeat("w ", i+1)) },
				func(i int) string { return fmt.Sprintf(`"words":%d`, i+1) }},
			{"json-transform", func(i int) string { return fmt.Sprintf(`{"data": {"a": [{"n": %d}]}, "query": ".a[] | .n"}`, i) },
				func(i int) string { return fmt.Sprintf(`{"results":[%d]}`, i) }},
			{"csv-summary", func(i int) string { return fmt.Sprintf(`{"data": "k,v\nx,%d", "group_by": "k"}`, i) },
				func(i int) string { return fmt.Sprintf(`"x":{"rows":1,"mean_v":%d.0}`, i) }},
		}
		dirs := map[string]string{}
		var names []string
		for _, k := range kinds {
			d, n := copyExample(t, m, k.example)
			dirs[k.example] = d
			names = append(names, n)
		}
		const n = 50
		var wg sync.WaitGroup
		results := make([]result, n)
		start := time.Now()
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				k := kinds[i%len(kinds)]
				results[i] = m.run(t, opts{timeout: 120 * time.Second}, "skill", "run", "--input", k.input(i), dirs[k.example])
			}(i)
		}
		wg.Wait()
		t.Logf("%d concurrent skill runs (%s) took %s", n, m.name, time.Since(start).Round(time.Millisecond))
		for i, res := range results {
			k := kinds[i%len(kinds)]
			if res.code != 0 {
				t.Errorf("run %d (%s): want exit 0\n%s", i, k.example, res)
				continue
			}
			r := decodeResult(t, res)
			if !r.OK || !strings.Contains(string(r.Output), k.want(i)) {
				t.Errorf("run %d (%s): output does not contain %s\n%s", i, k.example, k.want(i), res)
			}
		}
		m.assertClean(t, skillIDs(names...), names...)
		if left := cgroupDirsPrefixed(skillIDs(names...)); len(left) > 0 {
			t.Errorf("cgroups left behind: %v", left)
		}
	})
}

// startKilled starts skillrun with args, waits until the skillrun process
// itself exists (as the test user it is runuser's child), sleeps delay
// and SIGKILLs that process only (its container init, if any, lives on,
// as after a crash).
func startKilled(t *testing.T, m *mode, delay time.Duration, stdin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := m.command(ctx, opts{}, args...)
	cmd.Stdin = strings.NewReader(stdin)
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	cmd.Stdout, cmd.Stderr = devnull, devnull
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if m.rootless() {
		pid = 0
		for deadline := time.Now().Add(5 * time.Second); pid == 0 && time.Now().Before(deadline); {
			data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
			if f := strings.Fields(string(data)); len(f) > 0 {
				pid, _ = strconv.Atoi(f[0])
			} else {
				time.Sleep(time.Millisecond)
			}
		}
	}
	time.Sleep(delay)
	if pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = cmd.Wait()
}

// listOK checks that list (table and json) exits 0, prints only well-formed
// entries, and puts nothing but warnings on stderr. It returns the IDs.
func listOK(t *testing.T, m *mode) []string {
	t.Helper()
	res := m.run(t, opts{timeout: 10 * time.Second}, "list")
	if res.code != 0 || len(errorLines(res.stderr)) != 0 || strings.Contains(res.stderr, "panic") {
		t.Errorf("list must exit 0 with warnings only\n%s", res)
	}
	lines := strings.Split(strings.TrimRight(res.stdout, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "ID") {
		t.Errorf("list table has no header\n%s", res)
	}
	res = m.run(t, opts{timeout: 10 * time.Second}, "list", "--format", "json")
	if res.code != 0 || len(errorLines(res.stderr)) != 0 {
		t.Errorf("list --format json must exit 0 with warnings only\n%s", res)
	}
	var states []map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &states); err != nil {
		t.Errorf("list --format json is not a JSON array: %v\n%s", err, res)
	}
	var ids []string
	for _, s := range states {
		id, _ := s["id"].(string)
		status, _ := s["status"].(string)
		pid, _ := s["pid"].(float64)
		switch {
		case id == "":
			t.Errorf("list shows an entry without id: %v", s)
		case status != "created" && status != "running" && status != "stopped" && status != "paused":
			t.Errorf("list shows an entry with status %q: %v", status, s)
		case pid < 0:
			t.Errorf("list shows an entry with pid %v: %v", pid, s)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestKillDuringCreateAndRun SIGKILLs skillrun at random points (0-30 ms)
// of create and run: list stays sane, and delete --force then removes
// everything: state, processes, mounts, cgroups.
func TestKillDuringCreateAndRun(t *testing.T) {
	iterations := 12
	if testing.Short() {
		iterations = 4
	}
	forEachMode(t, func(t *testing.T, m *mode) {
		seed := time.Now().UnixNano()
		t.Logf("seed %d", seed)
		rnd := rand.New(rand.NewSource(seed))
		bundle := m.newBundle(t, "bundle", nil, "sleep", "1000")
		for i := 0; i < iterations; i++ {
			for _, verb := range []string{"create", "run"} {
				id := fmt.Sprintf("%s-k%d-%s", verb, i, uniqueID(t)[len(uniqueID(t))-8:])
				delay := time.Duration(rnd.Intn(31)) * time.Millisecond
				startKilled(t, m, delay, "", verb, "--bundle", bundle, id)
				listOK(t, m)
				if res := m.run(t, opts{}, "state", id); res.code != 0 {
					wantError(t, res, 1)
				} else if !json.Valid([]byte(res.stdout)) {
					t.Errorf("state after SIGKILL at %s is not JSON\n%s", delay, res)
				}
				res := m.run(t, opts{}, "delete", "--force", id)
				if res.code != 0 && !strings.Contains(res.stderr, "does not exist") {
					t.Errorf("delete --force after SIGKILL of %s at %s\n%s", verb, delay, res)
				}
				if left := m.leftovers([]string{id}, nil, 2*time.Second); len(left) > 0 {
					t.Errorf("after SIGKILL of %s at %s and delete --force: left %v", verb, delay, left)
					removeCgroups(id)
				}
			}
		}
	})
}

// TestKillDuringSkillRun SIGKILLs `skill run` at random points (0-150 ms:
// loading, bundle writing, container start and run): list stays sane;
// delete --force of what list shows, or the next run, removes everything,
// the bundle folder in TMPDIR included.
func TestKillDuringSkillRun(t *testing.T) {
	iterations := 10
	if testing.Short() {
		iterations = 4
	}
	forEachMode(t, func(t *testing.T, m *mode) {
		seed := time.Now().UnixNano()
		t.Logf("seed %d", seed)
		rnd := rand.New(rand.NewSource(seed))
		dir, name := copyExample(t, m, "text-stats")
		for i := 0; i < iterations; i++ {
			delay := time.Duration(rnd.Intn(151)) * time.Millisecond
			startKilled(t, m, delay, "", "skill", "run", "--input", `{"text": "a b c"}`, dir)
			for _, id := range listOK(t, m) {
				res := m.run(t, opts{}, "delete", "--force", id)
				if res.code != 0 && !strings.Contains(res.stderr, "does not exist") {
					t.Errorf("delete --force %s after SIGKILL at %s\n%s", id, delay, res)
				}
			}
			// The next run succeeds and must clean what the killed one left.
			res := m.run(t, opts{}, "skill", "run", "--input", `{"text": "a b c"}`, dir)
			if res.code != 0 || !strings.Contains(res.stdout, `"words":3`) {
				t.Errorf("run after a SIGKILLed run\n%s", res)
			}
			if left := m.leftovers(skillIDs(name), []string{name}, 5*time.Second); len(left) > 0 {
				t.Errorf("after SIGKILL of skill run at %s, delete --force and another run: left %v", delay, left)
				for _, l := range left {
					if p, ok := strings.CutPrefix(l, "TMPDIR entry "); ok {
						os.RemoveAll(p)
					}
				}
			}
		}
		if left := cgroupDirsPrefixed(skillIDs(name)); len(left) > 0 {
			t.Errorf("cgroups left behind: %v", left)
		}
	})
}

// removeCgroups removes the cgroup folders named id that a test found
// left behind, killing what is in them only when it lives in another pid
// namespace (a container process, never a host one).
func removeCgroups(id string) {
	for _, d := range hostcheck.CgroupDirsNamed(id) {
		hostcheck.RemoveCgroup(d)
	}
}

// TestCorruptState plants broken container folders in the state root:
// list (table and json) exits 0 and shows no corrupt entry (warnings on
// stderr only), state fails with one line or reports a sane state, and
// delete --force removes each.
func TestCorruptState(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		// A real state.json to corrupt: its container is deleted first, so
		// the copies name a gone init and gone cgroups (as after a crash).
		bundle := m.newBundle(t, "bundle", nil, "sleep", "1000")
		tmpl := uniqueID(t)
		m.track(t, tmpl)
		if res := m.run(t, opts{}, "create", "--bundle", bundle, tmpl); res.code != 0 {
			t.Fatalf("create\n%s", res)
		}
		good, err := os.ReadFile(filepath.Join(m.root, tmpl, "state.json"))
		if err != nil {
			t.Fatal(err)
		}
		if res := m.run(t, opts{}, "delete", "--force", tmpl); res.code != 0 {
			t.Fatalf("delete\n%s", res)
		}
		deadPid := func() int {
			c := exec.Command("true")
			c.Run()
			return c.Process.Pid
		}()
		var st map[string]any
		json.Unmarshal(good, &st)
		st["init_process_pid"] = deadPid
		dangling, _ := json.Marshal(st)
		st["init_process_pid"] = 1 // a live process that is not the container
		hostPid, _ := json.Marshal(st)
		garbage := make([]byte, 4096)
		rand.New(rand.NewSource(9)).Read(garbage)
		planted := map[string]func(dir string){
			"empty":     func(dir string) {},
			"garbage":   func(dir string) { os.WriteFile(filepath.Join(dir, "state.json"), garbage, 0o600) },
			"truncated": func(dir string) { os.WriteFile(filepath.Join(dir, "state.json"), good[:len(good)/2], 0o600) },
			"emptyfile": func(dir string) { os.WriteFile(filepath.Join(dir, "state.json"), nil, 0o600) },
			"null":      func(dir string) { os.WriteFile(filepath.Join(dir, "state.json"), []byte("null"), 0o600) },
			"dangling":  func(dir string) { os.WriteFile(filepath.Join(dir, "state.json"), dangling, 0o600) },
			"hostpid":   func(dir string) { os.WriteFile(filepath.Join(dir, "state.json"), hostPid, 0o600) },
			"folder":    func(dir string) { os.Mkdir(filepath.Join(dir, "state.json"), 0o700) },
			"huge": func(dir string) {
				f, _ := os.Create(filepath.Join(dir, "state.json"))
				f.Truncate(200 << 20)
				f.Close()
			},
		}
		var ids []string
		for kind, plant := range planted {
			id := "corrupt-" + kind + "-" + uniqueID(t)[len(uniqueID(t))-8:]
			ids = append(ids, id)
			dir := filepath.Join(m.root, id)
			if err := os.Mkdir(dir, 0o711); err != nil {
				t.Fatal(err)
			}
			plant(dir)
			m.chownTree(t, dir)
		}
		// A live container among them must stay listed.
		real := uniqueID(t)
		m.track(t, real)
		if res := m.run(t, opts{}, "create", "--bundle", bundle, real); res.code != 0 {
			t.Fatalf("create\n%s", res)
		}
		// A file (not a folder) in the root, too.
		m.writeFile(t, filepath.Join(m.root, "stray-file"), []byte("x"))
		shown := listOK(t, m)
		found := false
		for _, id := range shown {
			found = found || id == real
		}
		if !found {
			t.Errorf("list lost the real container %s among corrupt ones: %v", real, shown)
		}
		for _, id := range ids {
			res := m.run(t, opts{timeout: 10 * time.Second}, "state", id)
			if res.code != 0 {
				wantError(t, res, 1)
			} else {
				var s map[string]any
				if json.Unmarshal([]byte(res.stdout), &s) != nil || s["id"] != id || (s["status"] != "stopped" && s["status"] != "created" && s["status"] != "running") {
					t.Errorf("state of a corrupt container\n%s", res)
				}
				if strings.Contains(id, "hostpid") && s["status"] != "stopped" {
					t.Errorf("a state.json naming host pid 1 must not make it this container's live init\n%s", res)
				}
			}
			res = m.run(t, opts{timeout: 10 * time.Second}, "delete", "--force", id)
			if res.code != 0 && !strings.Contains(res.stderr, "does not exist") {
				t.Errorf("delete --force of a corrupt container must clean it\n%s", res)
			}
			if _, err := os.Lstat(filepath.Join(m.root, id)); err == nil {
				t.Errorf("delete --force left the corrupt state folder %s", id)
			}
		}
		if !pidAlive(1) {
			t.Fatal("pid 1 is gone")
		}
		os.Remove(filepath.Join(m.root, "stray-file"))
		if res := m.run(t, opts{}, "delete", "--force", real); res.code != 0 {
			t.Errorf("delete --force of the real container\n%s", res)
		}
		m.assertClean(t, append(ids, real, tmpl))
	})
}

// TestCorruptStateFIFO: a FIFO planted as a container's state.json must
// not make list, state or delete block (libcontainer opens it blocking).
func TestCorruptStateFIFO(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		id := "corrupt-fifo-" + uniqueID(t)[len(uniqueID(t))-8:]
		dir := m.mkdir(t, filepath.Join("state", id))
		if err := syscall.Mkfifo(filepath.Join(dir, "state.json"), 0o600); err != nil {
			t.Fatal(err)
		}
		m.chownTree(t, m.root)
		listOK(t, m)
		if res := m.run(t, opts{timeout: 10 * time.Second}, "state", id); res.code != 0 {
			wantError(t, res, 1, "state.json")
		}
		res := m.run(t, opts{timeout: 10 * time.Second}, "delete", "--force", id)
		if res.code != 0 && !strings.Contains(res.stderr, "does not exist") {
			t.Errorf("delete --force of a container whose state.json is a FIFO\n%s", res)
		}
		os.RemoveAll(dir)
	})
}
