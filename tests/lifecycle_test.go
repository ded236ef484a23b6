//go:build integration

package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-spec/specs-go/features"
)

// waiter is an init that reports the signals it gets on stdout; TERM and HUP
// end it (a pid-namespace init without handlers would ignore them).
var waiter = []string{"sh", "-c", `trap 'echo got-TERM; exit 0' TERM; trap 'echo got-HUP; exit 0' HUP; trap 'echo got-USR1' USR1; echo ready; while :; do sleep 1000 & wait; done`}

var stateKeys = []string{"annotations", "bundle", "created", "id", "ociVersion", "owner", "pid", "rootfs", "status"}

// checkStateKeys asserts the exact key set of a state object (annotations
// optional).
func checkStateKeys(t *testing.T, raw []byte) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("state is not a JSON object: %v: %s", err, raw)
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	sort.Strings(got)
	want := []string{}
	for _, k := range stateKeys {
		if _, ok := m[k]; ok || k != "annotations" {
			want = append(want, k)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("state keys = %v, want %v (annotations optional): %s", got, want, raw)
	}
}

func readPidFile(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	if !regexp.MustCompile(`^[0-9]+$`).Match(data) {
		t.Fatalf("pid file %s = %q, want digits only (no newline)", path, data)
	}
	pid, _ := strconv.Atoi(string(data))
	return pid
}

func nsLink(t *testing.T, pid int, ns string) string {
	t.Helper()
	l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
	if err != nil {
		t.Fatalf("ns of pid %d: %v", pid, err)
	}
	return l
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := newRT(t)
	res := r.ok("--version")
	if !strings.Contains(strings.ToLower(res.stdout), "version") {
		t.Errorf("--version output lacks a version\n%s", res)
	}
}

func TestSpec(t *testing.T) {
	t.Parallel()
	r := newRT(t)
	d := tempDir(t)
	res := r.ok("spec", "--bundle", d)
	if res.stdout != "" {
		t.Errorf("spec printed to stdout\n%s", res)
	}
	data, err := os.ReadFile(filepath.Join(d, "config.json"))
	if err != nil {
		t.Fatalf("spec --bundle %s wrote no config.json: %v", d, err)
	}
	var s specs.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("config.json is not a spec: %v", err)
	}
	if !strings.HasPrefix(s.Version, "1.") || s.Process == nil || !s.Process.Terminal || s.Root == nil || s.Root.Path != "rootfs" || s.Linux == nil {
		t.Errorf("unexpected default spec: version %q process %+v root %+v", s.Version, s.Process, s.Root)
	}
	nss := map[specs.LinuxNamespaceType]bool{}
	for _, ns := range s.Linux.Namespaces {
		nss[ns.Type] = true
	}
	for _, want := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.MountNamespace, specs.NetworkNamespace, specs.IPCNamespace, specs.UTSNamespace} {
		if !nss[want] {
			t.Errorf("default spec lacks %s namespace", want)
		}
	}
	if nss[specs.UserNamespace] {
		t.Errorf("default (root) spec has a user namespace")
	}

	t.Run("refuses to overwrite", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(d, "config.json"), []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		res := r.run("spec", "--bundle", d)
		if res.code != 1 {
			t.Errorf("spec over an existing config.json: want exit 1\n%s", res)
		}
		if got, _ := os.ReadFile(filepath.Join(d, "config.json")); string(got) != "keep" {
			t.Errorf("spec overwrote an existing config.json")
		}
	})
	t.Run("cwd", func(t *testing.T) {
		d := tempDir(t)
		res := r.exec(runOpts{dir: d}, "spec")
		if res.code != 0 {
			t.Fatalf("spec in cwd\n%s", res)
		}
		if _, err := os.Stat(filepath.Join(d, "config.json")); err != nil {
			t.Errorf("spec without --bundle did not write ./config.json: %v", err)
		}
	})
	t.Run("rootless", func(t *testing.T) {
		d := tempDir(t)
		r.ok("spec", "--rootless", "--bundle", d)
		data, err := os.ReadFile(filepath.Join(d, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		checkRootlessSpec(t, data, os.Geteuid(), os.Getegid())
	})
}

// checkRootlessSpec checks what `spec --rootless` must say for a caller
// with uid/gid: a user namespace mapping root to the caller, no network
// namespace.
func checkRootlessSpec(t *testing.T, data []byte, uid, gid int) {
	t.Helper()
	var s specs.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("rootless config.json is not a spec: %v", err)
	}
	if s.Linux == nil {
		t.Fatal("rootless spec has no linux section")
	}
	nss := map[specs.LinuxNamespaceType]bool{}
	for _, ns := range s.Linux.Namespaces {
		nss[ns.Type] = true
	}
	if !nss[specs.UserNamespace] {
		t.Errorf("rootless spec lacks a user namespace: %v", s.Linux.Namespaces)
	}
	if nss[specs.NetworkNamespace] {
		t.Errorf("rootless spec has a network namespace (an unprivileged user cannot configure one): %v", s.Linux.Namespaces)
	}
	wantU := []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(uid), Size: 1}}
	wantG := []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(gid), Size: 1}}
	if !reflect.DeepEqual(s.Linux.UIDMappings, wantU) || !reflect.DeepEqual(s.Linux.GIDMappings, wantG) {
		t.Errorf("rootless mappings uid %+v gid %+v, want %+v %+v", s.Linux.UIDMappings, s.Linux.GIDMappings, wantU, wantG)
	}
}

func TestFeatures(t *testing.T) {
	t.Parallel()
	r := newRT(t)
	res := r.ok("features")
	dec := json.NewDecoder(strings.NewReader(res.stdout))
	dec.DisallowUnknownFields()
	var f features.Features
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("features output is not runtime-spec features JSON: %v\n%s", err, res)
	}
	if f.OCIVersionMin == "" || f.OCIVersionMax == "" {
		t.Errorf("features lacks ociVersionMin/Max: %+v", f)
	}
	if f.Linux == nil {
		t.Fatalf("features has no linux section")
	}
	have := map[string]bool{}
	for _, n := range f.Linux.Namespaces {
		have[n] = true
	}
	for _, n := range []string{"pid", "mount", "user", "network", "ipc", "uts", "cgroup"} {
		if !have[n] {
			t.Errorf("features.linux.namespaces lacks %q: %v", n, f.Linux.Namespaces)
		}
	}
	if len(f.Hooks) == 0 || len(f.MountOptions) == 0 {
		t.Errorf("features lacks hooks or mountOptions")
	}
}

// TestLifecycle walks one container through every state, checking the
// runtime's answers against the host.
func TestLifecycle(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := newRT(t)
	b := newBundle(t, nil, waiter...)
	c := r.newContainer(b, "")
	pidFile := filepath.Join(b.dir, "init.pid")
	if res := c.createRaw(runOpts{}, "--pid-file", pidFile); res.code != 0 {
		t.Fatalf("create\n%s", res)
	}

	// created
	raw := r.ok("state", c.id)
	checkStateKeys(t, []byte(raw.stdout))
	st := c.state()
	c.setPid(st.Pid)
	if st.Status != "created" || st.ID != c.id || st.Bundle != b.dir || st.Rootfs != b.rootfs() || st.OCIVersion == "" {
		t.Errorf("state after create = %+v, want status created, id %s, bundle %s, rootfs %s", st, c.id, b.dir, b.rootfs())
	}
	if age := time.Since(st.Created); age < 0 || age > time.Minute {
		t.Errorf("state created %v is not recent", st.Created)
	}
	if pid := readPidFile(t, pidFile); pid != st.Pid || pid <= 0 {
		t.Errorf("pid file %d, state pid %d", pid, st.Pid)
	}
	if !pidAlive(st.Pid) {
		t.Fatalf("init pid %d of a created container is not alive on the host", st.Pid)
	}
	if nsLink(t, st.Pid, "pid") == nsLink(t, os.Getpid(), "pid") || nsLink(t, st.Pid, "mnt") == nsLink(t, os.Getpid(), "mnt") {
		t.Errorf("init pid %d shares our pid or mount namespace", st.Pid)
	}
	time.Sleep(100 * time.Millisecond)
	if out := c.Stdout(); out != "" {
		t.Errorf("the user process ran before start: stdout %q", out)
	}

	// running
	if res := r.ok("start", c.id); res.stdout != "" {
		t.Errorf("start printed to stdout\n%s", res)
	}
	c.waitStdout("ready", 10*time.Second)
	st = c.waitStatus("running", 5*time.Second)
	if st.Pid != c.pid {
		t.Errorf("pid changed from %d to %d on start", c.pid, st.Pid)
	}
	res := r.run("start", c.id)
	if res.code != 1 {
		t.Errorf("start of a running container: want exit 1\n%s", res)
	}

	// list
	res = r.ok("list")
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(lines) != 2 || !reflect.DeepEqual(strings.Fields(lines[0]), []string{"ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER"}) {
		t.Errorf("list table: want header and one row\n%s", res)
	} else if f := strings.Fields(lines[1]); len(f) != 6 || f[0] != c.id || f[1] != strconv.Itoa(c.pid) || f[2] != "running" || f[3] != b.dir || f[5] != "root" {
		t.Errorf("list row %q, want %s %d running %s ... root", lines[1], c.id, c.pid, b.dir)
	}
	if res = r.ok("list", "-q"); res.stdout != c.id+"\n" {
		t.Errorf("list -q: want %q\n%s", c.id+"\n", res)
	}
	res = r.ok("list", "--format", "json")
	var arr []json.RawMessage
	if err := json.Unmarshal([]byte(res.stdout), &arr); err != nil || len(arr) != 1 {
		t.Errorf("list --format json: want an array of one state: %v\n%s", err, res)
	} else {
		checkStateKeys(t, arr[0])
		var ls ociState
		json.Unmarshal(arr[0], &ls)
		if ls.ID != c.id || ls.Status != "running" || ls.Pid != c.pid {
			t.Errorf("list json entry %+v", ls)
		}
	}

	// ps
	pids := psJSON(t, r, c.id)
	if !containsInt(pids, c.pid) {
		t.Errorf("ps --format json = %v, lacks init pid %d", pids, c.pid)
	}

	// pause / resume, checked in the freezer cgroup
	r.ok("pause", c.id)
	if st = c.state(); st.Status != "paused" {
		t.Errorf("after pause: status %q", st.Status)
	}
	if _, ok := c.cgroups["freezer"]; ok {
		if fs := c.cgroupFile("freezer", "freezer.state"); fs != "FROZEN" {
			t.Errorf("after pause: freezer.state %q, want FROZEN", fs)
		}
	}
	r.ok("resume", c.id)
	if st = c.state(); st.Status != "running" {
		t.Errorf("after resume: status %q", st.Status)
	}
	if _, ok := c.cgroups["freezer"]; ok {
		if fs := c.cgroupFile("freezer", "freezer.state"); fs != "THAWED" {
			t.Errorf("after resume: freezer.state %q, want THAWED", fs)
		}
	}
	r.fails("", "resume", c.id) // not paused

	// stop with TERM: the trap proves which signal arrived
	r.ok("kill", c.id, "TERM")
	c.waitStdout("got-TERM", 10*time.Second)
	c.waitStatus("stopped", 10*time.Second)
	if !waitPidGone(c.pid, 5*time.Second) {
		t.Errorf("init %d alive after the container stopped", c.pid)
	}
	r.fails("", "start", c.id) // stopped

	r.ok("delete", c.id)
	r.fails("container does not exist", "state", c.id)
	if res := r.ok("list", "-q"); res.stdout != "" {
		t.Errorf("list after delete not empty\n%s", res)
	}
	assertNoTrace(t, r, c.id, c.pid, b.dir)
}

func psJSON(t *testing.T, r *rt, id string) []int {
	t.Helper()
	res := r.ok("ps", "--format", "json", id)
	var pids []int
	if err := json.Unmarshal([]byte(res.stdout), &pids); err != nil {
		t.Fatalf("ps --format json: not a JSON array of ints: %v\n%s", err, res)
	}
	return pids
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestCreateShortBundleFlag(t *testing.T) {
	t.Parallel()
	needRoot(t)
	r := newRT(t)
	b := newBundle(t, nil, "sh", "-c", "echo short-flag")
	c := r.newContainer(b, "")
	out, errf := c.openStdio()
	defer out.Close()
	defer errf.Close()
	// from another directory, so a relative default bundle would be wrong
	if res := r.exec(runOpts{stdout: out, stderr: errf, dir: "/"}, "create", "-b", b.dir, c.id); res.code != 0 {
		t.Fatalf("create -b\n%s", res)
	}
	if st := c.state(); st.Bundle != b.dir {
		t.Errorf("bundle %q, want %q", st.Bundle, b.dir)
	}
	r.ok("start", c.id)
	c.waitStdout("short-flag", 10*time.Second)
}

func TestKillSignals(t *testing.T) {
	needRoot(t)
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string
		stop bool
	}{
		{"name", []string{"TERM"}, "got-TERM", true},
		{"sig-name", []string{"SIGTERM"}, "got-TERM", true},
		{"number", []string{"15"}, "got-TERM", true},
		{"default-is-TERM", nil, "got-TERM", true},
		{"hup-number", []string{"1"}, "got-HUP", true},
		{"usr1", []string{"USR1"}, "got-USR1", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRT(t)
			c := r.start(newBundle(t, nil, waiter...))
			c.waitStdout("ready", 10*time.Second)
			r.ok(append([]string{"kill", c.id}, tc.args...)...)
			c.waitStdout(tc.want, 10*time.Second)
			if tc.stop {
				c.waitStatus("stopped", 10*time.Second)
				if !waitPidGone(c.pid, 5*time.Second) {
					t.Errorf("pid %d alive after kill %v", c.pid, tc.args)
				}
			} else {
				time.Sleep(100 * time.Millisecond)
				if st := c.state(); st.Status != "running" || !pidAlive(c.pid) {
					t.Errorf("kill %v (a handled signal) stopped the container: %+v", tc.args, st)
				}
			}
		})
	}
}

func TestKillAll(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := newRT(t)
	c := r.start(newBundle(t, nil, "sh", "-c", "sleep 1000 & sleep 1000 & echo ready; wait"))
	c.waitStdout("ready", 10*time.Second)
	var pids []int
	for i := 0; i < 100; i++ {
		if pids = psJSON(t, r, c.id); len(pids) >= 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(pids) != 3 {
		t.Fatalf("ps: want 3 processes, got %v", pids)
	}
	r.ok("kill", "--all", c.id, "KILL")
	for _, p := range pids {
		if !waitPidGone(p, 5*time.Second) {
			t.Errorf("pid %d alive after kill --all KILL", p)
		}
	}
	c.waitStatus("stopped", 5*time.Second)
	r.ok("delete", c.id)
	assertNoTrace(t, r, c.id, c.pid, c.b.dir)
}

func TestDelete(t *testing.T) {
	needRoot(t)
	t.Parallel()
	t.Run("running-needs-force", func(t *testing.T) {
		t.Parallel()
		r := newRT(t)
		c := r.start(newBundle(t, nil, "sleep", "1000"))
		res := r.run("delete", c.id)
		if res.code != 1 {
			t.Errorf("delete of a running container without --force: want exit 1\n%s", res)
		}
		if st := c.state(); st.Status != "running" || !pidAlive(c.pid) {
			t.Fatalf("failed delete changed the container: %+v alive=%v", st, pidAlive(c.pid))
		}
		r.ok("delete", "--force", c.id)
		assertNoTrace(t, r, c.id, c.pid, c.b.dir)
		r.fails("container does not exist", "state", c.id)
	})
	t.Run("created", func(t *testing.T) {
		t.Parallel()
		r := newRT(t)
		c := r.create(newBundle(t, nil, "sh", "-c", "echo must-not-run"))
		r.ok("delete", c.id)
		assertNoTrace(t, r, c.id, c.pid, c.b.dir)
		if out := c.Stdout(); out != "" {
			t.Errorf("deleting a created container ran its process: %q", out)
		}
	})
	t.Run("paused-force", func(t *testing.T) {
		t.Parallel()
		r := newRT(t)
		c := r.start(newBundle(t, nil, "sleep", "1000"))
		r.ok("pause", c.id)
		r.ok("delete", "--force", c.id)
		assertNoTrace(t, r, c.id, c.pid, c.b.dir)
	})
}

func TestCreateFlags(t *testing.T) {
	needRoot(t)
	t.Parallel()
	t.Run("no-pivot", func(t *testing.T) {
		t.Parallel()
		r := newRT(t)
		c := r.create(newBundle(t, nil, "sh", "-c", "ls /; echo pivot-ok"), "--no-pivot")
		r.ok("start", c.id)
		c.waitStdout("pivot-ok", 10*time.Second)
		if out := c.Stdout(); !strings.Contains(out, "bin") || strings.Contains(out, "work") {
			t.Errorf("container root under --no-pivot is not the bundle rootfs: %q", out)
		}
	})
	for _, keyring := range []bool{true, false} {
		name := "new-keyring"
		if !keyring {
			name = "no-new-keyring"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newRT(t)
			b := newBundle(t, nil, "sh", "-c", "cat /proc/keys; echo keys-done")
			var masked []string
			for _, p := range b.spec.Linux.MaskedPaths {
				if p != "/proc/keys" {
					masked = append(masked, p)
				}
			}
			b.spec.Linux.MaskedPaths = masked
			b.save()
			var flags []string
			if !keyring {
				flags = append(flags, "--no-new-keyring")
			}
			c := r.create(b, flags...)
			r.ok("start", c.id)
			c.waitStdout("keys-done", 10*time.Second)
			has := strings.Contains(c.Stdout(), "_ses."+c.id)
			if has != keyring {
				t.Errorf("session keyring _ses.%s present=%v, want %v; /proc/keys in the container:\n%s", c.id, has, keyring, c.Stdout())
			}
		})
	}
	t.Run("preserve-fds", func(t *testing.T) {
		t.Parallel()
		for _, preserve := range []bool{true, false} {
			r := newRT(t)
			b := newBundle(t, nil, "sh", "-c", "echo via-fd3 >&3 && echo wrote")
			extra, err := os.Create(filepath.Join(b.dir, "fd3"))
			if err != nil {
				t.Fatal(err)
			}
			var flags []string
			if preserve {
				flags = []string{"--preserve-fds", "1"}
			}
			c := r.newContainer(b, "")
			res := c.createRaw(runOpts{extraFiles: []*os.File{extra}}, flags...)
			extra.Close()
			if res.code != 0 {
				t.Fatalf("create %v\n%s", flags, res)
			}
			r.ok("start", c.id)
			c.waitStatus("stopped", 10*time.Second)
			got, _ := os.ReadFile(filepath.Join(b.dir, "fd3"))
			if preserve && (string(got) != "via-fd3\n" || !strings.Contains(c.Stdout(), "wrote")) {
				t.Errorf("--preserve-fds 1: fd 3 got %q, stdout %q stderr %q", got, c.Stdout(), c.output(c.stderr))
			}
			if !preserve && (len(got) != 0 || strings.Contains(c.Stdout(), "wrote")) {
				t.Errorf("without --preserve-fds fd 3 reached the container: %q", got)
			}
		}
	})
}

func TestExec(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := newRT(t)
	c := r.start(newBundle(t, nil, "sleep", "1000"))
	t.Run("exit-status", func(t *testing.T) {
		for _, code := range []int{0, 1, 7, 255} {
			res := r.run("exec", c.id, "sh", "-c", fmt.Sprintf("exit %d", code))
			if res.code != code {
				t.Errorf("exec exit %d: got %d\n%s", code, res.code, res)
			}
		}
	})
	t.Run("args-and-stdout", func(t *testing.T) {
		if res := r.ok("exec", c.id, "echo", "hello", "world"); res.stdout != "hello world\n" {
			t.Errorf("stdout %q\n%s", res.stdout, res)
		}
		if res := r.ok("exec", c.id, "sh", "-c", "echo to-stderr >&2"); res.stderr != "to-stderr\n" || res.stdout != "" {
			t.Errorf("stderr passthrough\n%s", res)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		res := r.exec(runOpts{stdin: strings.NewReader("from stdin\n")}, "exec", c.id, "cat")
		if res.code != 0 || res.stdout != "from stdin\n" {
			t.Errorf("stdin passthrough\n%s", res)
		}
	})
	t.Run("env", func(t *testing.T) {
		if res := r.ok("exec", "--env", "FOO=bar baz", "--env", "X=1", c.id, "sh", "-c", `echo "$FOO/$X"`); res.stdout != "bar baz/1\n" {
			t.Errorf("--env\n%s", res)
		}
	})
	t.Run("cwd", func(t *testing.T) {
		if res := r.ok("exec", "--cwd", "/etc", c.id, "pwd"); res.stdout != "/etc\n" {
			t.Errorf("--cwd\n%s", res)
		}
	})
	t.Run("user", func(t *testing.T) {
		if res := r.ok("exec", "--user", "1000:1000", c.id, "sh", "-c", "echo $(id -u):$(id -g)"); res.stdout != "1000:1000\n" {
			t.Errorf("--user 1000:1000\n%s", res)
		}
		if res := r.ok("exec", c.id, "id", "-u"); res.stdout != "0\n" {
			t.Errorf("default exec user\n%s", res)
		}
	})
	t.Run("process-file", func(t *testing.T) {
		p := specs.Process{
			Args: []string{"sh", "-c", `echo "$PROCVAR"; pwd; id -u; exit 5`},
			Env:  []string{"PROCVAR=from-file", "PATH=/bin"},
			Cwd:  "/tmp",
			User: specs.User{UID: 1000, GID: 1000},
		}
		data, _ := json.Marshal(p)
		f := filepath.Join(tempDir(t), "process.json")
		os.WriteFile(f, data, 0o644)
		res := r.run("exec", "--process", f, c.id)
		if res.code != 5 || res.stdout != "from-file\n/tmp\n1000\n" {
			t.Errorf("exec --process: want exit 5 and from-file,/tmp,1000\n%s", res)
		}
	})
	t.Run("detach-pid-file", func(t *testing.T) {
		pf := filepath.Join(tempDir(t), "exec.pid")
		res := r.run("exec", "--detach", "--pid-file", pf, c.id, "sleep", "999")
		if res.code != 0 || res.stdout != "" {
			t.Fatalf("exec --detach\n%s", res)
		}
		pid := readPidFile(t, pf)
		if !pidAlive(pid) {
			t.Fatalf("detached exec pid %d not alive on the host", pid)
		}
		if nsLink(t, pid, "pid") != nsLink(t, c.pid, "pid") || nsLink(t, pid, "mnt") != nsLink(t, c.pid, "mnt") {
			t.Errorf("exec pid %d is not in the container's namespaces", pid)
		}
		// exec --detach returns once the process is started in the
		// container (runc too), a moment before its execve: wait for it.
		var cmd []byte
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			cmd, _ = os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if strings.HasPrefix(string(cmd), "sleep\x00999") || time.Now().After(deadline) {
				break
			}
		}
		if !strings.HasPrefix(string(cmd), "sleep\x00999") {
			t.Errorf("exec pid %d runs %q, want sleep 999", pid, cmd)
		}
		if pids := psJSON(t, r, c.id); !containsInt(pids, pid) {
			t.Errorf("ps %v lacks exec pid %d", pids, pid)
		}
		if cg := hostCgroups(pid); cg["pids"] != c.cgroups["pids"] {
			t.Errorf("exec pid %d in pids cgroup %q, container in %q", pid, cg["pids"], c.cgroups["pids"])
		}
	})
}

func TestUpdate(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := newRT(t)
	b := newBundle(t, nil, "sleep", "1000")
	limit := int64(55)
	b.spec.Linux.Resources = &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: &limit}}
	b.save()
	c := r.start(b)
	if _, ok := c.cgroups["pids"]; !ok {
		t.Fatalf("container init %d is in no pids cgroup: %v", c.pid, c.cgroups)
	}
	if got := c.cgroupFile("pids", "pids.max"); got != "55" {
		t.Errorf("pids.max from config.json = %s, want 55", got)
	}
	if procs := c.cgroupFile("pids", "cgroup.procs"); procs != strconv.Itoa(c.pid) {
		t.Errorf("pids cgroup.procs = %q, want only init %d", procs, c.pid)
	}
	r.ok("update", "--pids-limit", "42", c.id)
	if got := c.cgroupFile("pids", "pids.max"); got != "42" {
		t.Errorf("after update --pids-limit 42: pids.max %s", got)
	}
	r.ok("update", "--memory", "67108864", c.id)
	if got := c.cgroupFile("memory", "memory.limit_in_bytes"); got != "67108864" {
		t.Errorf("after update --memory 67108864: memory.limit_in_bytes %s", got)
	}
	r.ok("update", "--cpu-share", "512", c.id)
	if got := c.cgroupFile("cpu", "cpu.shares"); got != "512" {
		t.Errorf("after update --cpu-share 512: cpu.shares %s", got)
	}
	f := filepath.Join(tempDir(t), "res.json")
	os.WriteFile(f, []byte(`{"pids":{"limit":43}}`), 0o644)
	r.ok("update", "--resources", f, c.id)
	if got := c.cgroupFile("pids", "pids.max"); got != "43" {
		t.Errorf("after update --resources FILE (pids 43): pids.max %s", got)
	}
	res := r.exec(runOpts{stdin: strings.NewReader(`{"pids":{"limit":44},"memory":{"limit":33554432}}`)}, "update", "--resources", "-", c.id)
	if res.code != 0 {
		t.Fatalf("update --resources -\n%s", res)
	}
	if got := c.cgroupFile("pids", "pids.max"); got != "44" {
		t.Errorf("after update --resources - (pids 44): pids.max %s", got)
	}
	if got := c.cgroupFile("memory", "memory.limit_in_bytes"); got != "33554432" {
		t.Errorf("after update --resources - (memory 32 MiB): memory.limit_in_bytes %s", got)
	}
	if st := c.state(); st.Status != "running" {
		t.Errorf("after update: status %s", st.Status)
	}
	r.ok("delete", "--force", c.id)
	assertNoTrace(t, r, c.id, c.pid, b.dir)
}

func TestEventsStats(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := newRT(t)
	c := r.start(newBundle(t, nil, "sleep", "1000"))
	// "running" can be reported while the (multi-threaded) runtime init is
	// still on its way to exec: wait for sleep itself.
	waitExeced(t, c.pid, "sleep")
	res := r.ok("events", "--stats", c.id)
	lines := strings.Split(strings.TrimRight(res.stdout, "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("events --stats: want one line\n%s", res)
	}
	var ev struct {
		Type string                     `json:"type"`
		ID   string                     `json:"id"`
		Data map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &ev); err != nil {
		t.Fatalf("events --stats line is not JSON: %v\n%s", err, res)
	}
	if ev.Type != "stats" || ev.ID != c.id {
		t.Errorf("event type %q id %q, want stats %s", ev.Type, ev.ID, c.id)
	}
	for _, k := range []string{"cpu", "memory", "pids"} {
		if _, ok := ev.Data[k]; !ok {
			t.Errorf("stats data lacks %q: %s", k, lines[0])
		}
	}
	var pids struct {
		Current uint64 `json:"current"`
	}
	json.Unmarshal(ev.Data["pids"], &pids)
	if pids.Current != 1 {
		t.Errorf("stats pids.current = %d, want 1 (just sleep)", pids.Current)
	}
}

func TestDefaultRoot(t *testing.T) {
	needRoot(t)
	t.Parallel()
	r := &rt{t: t} // no --root
	b := newBundle(t, nil, "sleep", "1000")
	c := r.newContainer(b, "")
	if res := c.createRaw(runOpts{}); res.code != 0 {
		t.Fatalf("create without --root\n%s", res)
	}
	dir := filepath.Join(info().defaultRoot, c.id)
	st := c.state()
	c.setPid(st.Pid)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("%s with no --root: state dir %s missing: %v", runtimeName, dir, err)
	}
	r.ok("delete", "--force", c.id)
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("state dir %s survived delete", dir)
	}
	assertNoTrace(t, r, c.id, c.pid, b.dir)
}

// waitExeced waits until pid runs the program named prog.
func waitExeced(t *testing.T, pid int, prog string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.HasPrefix(string(cmd), prog+"\x00") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pid %d never exec'd %s", pid, prog)
}

// TestIgnoredSignalsNotInherited: a runtime started with SIGHUP and
// SIGINT ignored (under nohup, or by a shim or service that ignores
// them) starts containers with the default action for them, as runc
// does: a container's process cannot trap a signal ignored at its start.
// The control shows nohup ignores SIGHUP on this host.
func TestIgnoredSignalsNotInherited(t *testing.T) {
	needRoot(t)
	t.Parallel()
	if _, err := exec.LookPath("nohup"); err != nil {
		t.Skip("skipped: no nohup on this host")
	}
	sigIgn := func(t *testing.T, status string) uint64 {
		t.Helper()
		for _, l := range strings.Split(status, "\n") {
			if v, ok := strings.CutPrefix(l, "SigIgn:"); ok {
				n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				if err != nil {
					t.Fatalf("SigIgn %q: %v", v, err)
				}
				return n
			}
		}
		t.Fatalf("no SigIgn line in %q", status)
		return 0
	}
	const hup = 1 << (1 - 1)
	out, err := exec.Command("nohup", "cat", "/proc/self/status").Output()
	if err != nil {
		t.Fatalf("control: nohup cat: %v", err)
	}
	if sigIgn(t, string(out))&hup == 0 {
		t.Skip("skipped: nohup does not ignore SIGHUP on this host (control)")
	}
	const hupInt = 1<<(1-1) | 1<<(2-1)
	t.Run("create-start", func(t *testing.T) {
		r := newRT(t)
		b := newBundle(t, nil, "sh", "-c", "cat /proc/self/status; echo done")
		r.wrap = []string{"nohup"}
		c := r.create(b)
		r.wrap = nil
		r.ok("start", c.id)
		c.waitStdout("done", 10*time.Second)
		if m := sigIgn(t, c.Stdout()); m&hupInt != 0 {
			t.Errorf("the container's process starts with SigIgn %#x: SIGHUP/SIGINT ignored, inherited from the runtime's caller", m)
		}
	})
	t.Run("run", func(t *testing.T) {
		r := newRT(t)
		b := newBundle(t, nil, "cat", "/proc/self/status")
		r.wrap = []string{"nohup"}
		res := r.ok("run", "--bundle", b.dir, uniqueID(t))
		if m := sigIgn(t, res.stdout); m&hupInt != 0 {
			t.Errorf("the container's process starts with SigIgn %#x: SIGHUP/SIGINT ignored, inherited from the runtime's caller", m)
		}
	})
}
