//go:build integration

package clients_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rootlessUser is the unprivileged user hack/ensure-test-user.sh creates.
func rootlessUser() string {
	if u := os.Getenv("SKILLRUN_TEST_USER"); u != "" {
		return u
	}
	return "skillrun-test"
}

// podman is one private podman set-up: storage, run and tmp dirs, containers.conf
// and storage.conf all live in a temp dir, never in the real user's config.
type podman struct {
	t        *testing.T
	dir      string
	rootless bool
	usr      *user.User
	runtime  string // argv-logging wrapper named like the runtime under test
	real     string // the runtime under test
	name     string // runtime name: basename of $RUNTIME
	argvLog  string
	rootfs   string
	xdg      string // rootless XDG_RUNTIME_DIR
	work     string // a directory podman may write to (cidfiles)
	tmpDir   string
	env      []string
	global   []string // podman global flags
	runFlags []string // flags this host needs on every `podman run`
}

func newPodman(t *testing.T, rootless bool) *podman {
	t.Helper()
	requireRoot(t) // rootless runs as the test user through runuser, which needs root
	requireBinary(t, "podman")
	requireBinary(t, "conmon")
	real := runtimeUnderTest(t)
	p := &podman{t: t, rootless: rootless, real: real, name: filepath.Base(real)}
	if rootless {
		requireBinary(t, "runuser")
		requireBinary(t, "newuidmap")
		u, err := user.Lookup(rootlessUser())
		if err != nil {
			t.Skipf("SKIP: rootless test user %q missing (create it with hack/ensure-test-user.sh): %v", rootlessUser(), err)
		}
		p.usr = u
		for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
			b, _ := os.ReadFile(f)
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(u.Username) + `:`).Match(b) {
				t.Skipf("SKIP: %s has no range for %s (run hack/ensure-test-user.sh)", f, u.Username)
			}
		}
		// The user's podman runs the runtime: a copy it can reach when a
		// parent folder of the checkout is closed to it.
		staged, err := stage.Exec(u.Username, real)
		if err != nil {
			t.Skipf("SKIP: rootless test user %s cannot reach the runtime under test: %v", u.Username, err)
		}
		p.real = staged
	}
	p.dir = tempDir(t, "pdm")
	p.argvLog = filepath.Join(p.dir, "argv.log")
	p.runtime = argvWrapper(t, filepath.Join(p.dir, "wrap"), p.name, p.real, p.argvLog)
	p.rootfs = busyboxRootfs(t, p.dir)

	home := filepath.Join(p.dir, "home")
	p.xdg = filepath.Join(p.dir, "xdg")
	graph := filepath.Join(p.dir, "graph")
	runroot := filepath.Join(p.dir, "runroot")
	p.tmpDir = filepath.Join(p.dir, "tmp")
	p.work = p.dir
	if rootless {
		p.work = home
		graph = filepath.Join(home, "graph")
		runroot = filepath.Join(p.xdg, "runroot")
		p.tmpDir = filepath.Join(p.xdg, "tmp")
		uid, _ := strconv.Atoi(p.usr.Uid)
		gid, _ := strconv.Atoi(p.usr.Gid)
		for _, d := range []string{home, p.xdg} {
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(d, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		// The user's container root owns its root file system, as with any rootless rootfs.
		err := filepath.WalkDir(p.rootfs, func(path string, _ os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(path, uid, gid)
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	// The runtime_supports_json list replaces podman's default one: keep the
	// defaults and add skillrun; runtime makes it podman's default, as
	// docs/integrations.md documents for OpenShell's Podman driver.
	conf := fmt.Sprintf(`[engine]
runtime = %[1]q
runtime_supports_json = ["crun", "runc", "kata", "runsc", "youki", "krun", "skillrun"]
cgroup_manager = "cgroupfs"
events_logger = "file"

[engine.runtimes]
%[1]s = [%[2]q]
`, p.name, p.runtime)
	storage := fmt.Sprintf("[storage]\ndriver = \"vfs\"\nrunroot = %q\ngraphroot = %q\n", runroot, graph)
	for name, content := range map[string]string{"containers.conf": conf, "storage.conf": storage} {
		if err := os.WriteFile(filepath.Join(p.dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	p.env = []string{
		"PATH=" + path,
		"CONTAINERS_CONF=" + filepath.Join(p.dir, "containers.conf"),
		"CONTAINERS_STORAGE_CONF=" + filepath.Join(p.dir, "storage.conf"),
	}
	if rootless {
		p.env = append(p.env, "HOME="+home, "XDG_RUNTIME_DIR="+p.xdg, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
			"USER="+p.usr.Username, "LOGNAME="+p.usr.Username)
	} else {
		p.env = append(p.env, "HOME="+os.Getenv("HOME"))
	}
	p.global = []string{"--root", graph, "--runroot", runroot, "--tmpdir", p.tmpDir, "--storage-driver", "vfs",
		"--cgroup-manager", "cgroupfs", "--events-backend", "file"}
	p.runFlags = []string{"--network", "none"}
	if !rootless {
		// This VM lacks CAP_SYS_RESOURCE: podman's default ulimits cannot be raised.
		p.runFlags = append(p.runFlags, "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=32768:32768")
	}
	t.Cleanup(p.cleanup)
	return p
}

// argv builds the full command line of a podman call (through runuser when rootless).
func (p *podman) argv(args ...string) []string {
	cmd := append(append([]string{"podman"}, p.global...), args...)
	if p.rootless {
		return append(append([]string{"runuser", "-u", p.usr.Username, "--", "env", "-i"}, p.env...), cmd...)
	}
	return cmd
}

func (p *podman) spec() cmdSpec {
	if p.rootless {
		return cmdSpec{env: []string{"PATH=" + os.Getenv("PATH")}, dir: "/"}
	}
	return cmdSpec{env: p.env, dir: "/"}
}

func (p *podman) run(ctx context.Context, args ...string) result {
	return runCmd(ctx, p.spec(), p.argv(args...)...)
}

func (p *podman) diag() string {
	return fmt.Sprintf("runtime calls (argv log %s):\n%s", p.argvLog, indent(tail(p.argvLog, 15)))
}

// must runs podman and fails the test unless it exits with want.
func (p *podman) must(ctx context.Context, want int, args ...string) result {
	p.t.Helper()
	r := p.run(ctx, args...)
	if r.code != want {
		p.t.Fatalf("want exit code %d\n%s\n%s", want, r, p.diag())
	}
	return r
}

// runArgs: `podman run` with the runtime under test (by path) and the host's flags.
func (p *podman) runArgs(extra ...string) []string {
	args := append([]string{"--runtime", p.runtime, "run"}, p.runFlags...)
	return append(append(args, extra...), "--rootfs", p.rootfs)
}

// defaultRunArgs: `podman run` with no --runtime (containers.conf's
// engine.runtime decides) and the host's flags.
func (p *podman) defaultRunArgs(extra ...string) []string {
	args := append([]string{"run"}, p.runFlags...)
	return append(append(args, extra...), "--rootfs", p.rootfs)
}

// ranByRuntime fails unless the runtime under test (its argv log) created
// the container named name.
func (p *podman) ranByRuntime(ctx context.Context, name string) {
	p.t.Helper()
	id := p.inspect(ctx, name, "{{.Id}}")
	if b, _ := os.ReadFile(p.argvLog); !regexp.MustCompile(`(?m)(^|\s)create .*` + id).Match(b) {
		p.t.Errorf("container %s (%s) was not created by the runtime under test (containers.conf engine.runtime)\n%s", name, id, p.diag())
	}
}

func (p *podman) inspect(ctx context.Context, name, format string) string {
	p.t.Helper()
	return strings.TrimSpace(p.must(ctx, 0, "inspect", "--format", format, name).stdout)
}

// runtimeGlobals are the flags that point a host-side runtime call at the
// state root podman's calls used: the runtime's default root (root: no
// flag, rootless: $XDG_RUNTIME_DIR is honoured).
func (p *podman) runtimeState(ctx context.Context, id string) (bool, result) {
	if !p.rootless {
		return runtimeStateGone(ctx, p.real, nil, id)
	}
	argv := append(append([]string{"runuser", "-u", p.usr.Username, "--", "env", "-i"}, p.env...), p.real, "state", id)
	r := runCmd(ctx, cmdSpec{env: []string{"PATH=" + os.Getenv("PATH")}, dir: "/"}, argv...)
	return r.code != 0 && strings.Contains(r.stdout+r.stderr, "does not exist"), r
}

// assertGone checks from the host side that nothing of container id is left.
func (p *podman) assertGone(ctx context.Context, id string, pid int) {
	t := p.t
	t.Helper()
	if id == "" {
		t.Errorf("no container ID to check")
		return
	}
	if r := p.run(ctx, "ps", "-a", "-q", "--no-trunc"); strings.Contains(r.stdout, id) {
		t.Errorf("podman still lists container %s after removal\n%s", id, r)
	}
	if gone, r := p.runtimeState(ctx, id); !gone {
		t.Errorf("after removal the runtime still reports the container (want an error containing \"does not exist\")\n%s", r)
	}
	if pid > 0 && !waitFor(5*time.Second, func() bool { return !pidAlive(pid) }) {
		t.Errorf("container pid %d still alive after removal: %s", pid, cmdlineOf(pid))
	}
	if !waitFor(5*time.Second, func() bool { return len(procsWithCmdline(id)) == 0 }) {
		for _, q := range procsWithCmdline(id) {
			t.Errorf("process still running for the removed container: pid %d %s", q, cmdlineOf(q))
		}
	}
	// Nothing named after the container under the private dirs (runtime state
	// root for rootless, podman's userdata, exit files) and in the runtime's
	// root state dir.
	var left []string
	_ = filepath.WalkDir(p.dir, func(path string, e os.DirEntry, err error) error {
		if err == nil && strings.Contains(e.Name(), id) {
			left = append(left, path)
			if e.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	if !p.rootless {
		for _, root := range []string{"/run/" + p.name, "/run/skillrun", "/run/runc"} {
			if _, err := os.Stat(filepath.Join(root, id)); err == nil {
				left = append(left, filepath.Join(root, id))
			}
		}
		if dirs := cgroupDirs("libpod_parent/libpod-" + id); len(dirs) > 0 {
			t.Errorf("cgroups of the container still exist after removal: %v", dirs)
		}
	}
	if len(left) > 0 {
		t.Errorf("state of container %s left behind after removal: %v\n%s", id, left, p.diag())
	}
	if m := mountsUnder(p.dir); len(m) > 0 {
		t.Errorf("mounts left under %s on the host: %v", p.dir, m)
	}
}

// createdIDs returns the container IDs the runtime was asked to create.
func (p *podman) createdIDs() []string {
	b, _ := os.ReadFile(p.argvLog)
	var ids []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for i, a := range f {
			if a == "create" && i+1 < len(f) && len(f) > 0 {
				ids = append(ids, f[len(f)-1])
			}
		}
	}
	return ids
}

func (p *podman) cleanup() {
	t := p.t
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if r := p.run(ctx, "ps", "-a", "-q"); strings.TrimSpace(r.stdout) != "" {
		t.Logf("cleanup: removing leftover podman containers %s", strings.Fields(r.stdout))
		// Kill the containers' processes (below conmon) without relying on
		// the runtime under test, then let podman clean up.
		if d := descendants(procsWithCmdline(p.dir)); len(d) > 0 {
			killPIDs(t, "process under conmon", d)
		}
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		if r := p.run(rctx, "rm", "--all", "--force", "--time", "0"); r.code != 0 {
			t.Logf("cleanup: %s", r)
		}
		rcancel()
	}
	killSupervised(t, "process of the private podman (conmon?)", procsWithCmdline(p.dir))
	// The rootless pause process (catatonit) holds podman's user namespace.
	if b, err := os.ReadFile(filepath.Join(p.tmpDir, "pause.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 && pidAlive(pid) {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			if !waitFor(3*time.Second, func() bool { return !pidAlive(pid) }) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	// Runtime state podman could not remove.
	for _, id := range p.createdIDs() {
		if p.rootless {
			continue // lives under p.xdg, removed with the temp dir
		}
		if gone, _ := runtimeStateGone(ctx, p.real, nil, id); !gone {
			t.Logf("cleanup: runtime still knows %s, force-deleting", id)
			runCmd(ctx, cmdSpec{env: os.Environ()}, p.real, "delete", "--force", id)
		}
		removeCgroups(t, "libpod_parent/libpod-"+id)
	}
}

func podmanSubtests(t *testing.T, p *podman) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sub := func(name string, f func(t *testing.T, p *podman)) {
		t.Run(name, func(t *testing.T) {
			q := *p
			q.t = t
			f(t, &q)
		})
	}
	cid := func(p *podman, name string) string { return filepath.Join(p.work, name+".cid") }
	readCID := func(path string) string { b, _ := os.ReadFile(path); return strings.TrimSpace(string(b)) }

	sub("echo", func(t *testing.T, p *podman) {
		cf := cid(p, "echo")
		r := p.must(ctx, 0, append(p.runArgs("--rm", "--cidfile", cf), "sh", "-c", "echo hello from podman; id -u")...)
		want := "hello from podman\n0\n"
		if r.stdout != want {
			t.Errorf("stdout = %q, want %q\n%s", r.stdout, want, r)
		}
		id := readCID(cf)
		calls, _ := os.ReadFile(p.argvLog)
		// conmon passes --log-format=json --log F only to runtimes named in runtime_supports_json.
		if !regexp.MustCompile(`(?m)^--log-format=json --log \S+ create --bundle \S+ --pid-file \S+ ` + id + `$`).Match(calls) {
			t.Errorf("create not called as `--log-format=json --log F create --bundle B --pid-file P ID` (runtime_supports_json honoured?); calls:\n%s", calls)
		}
		p.assertGone(ctx, id, 0)
	})

	sub("exit-code", func(t *testing.T, p *podman) {
		cf := cid(p, "exit")
		r := p.must(ctx, 7, append(p.runArgs("--rm", "--cidfile", cf), "sh", "-c", "echo err >&2; exit 7")...)
		if !strings.Contains(r.stderr, "err") {
			t.Errorf("container stderr not passed through\n%s", r)
		}
		p.assertGone(ctx, readCID(cf), 0)
	})

	sub("containers-conf-runtime", func(t *testing.T, p *podman) {
		// The runtime selected by its name from containers.conf [engine.runtimes].
		cf := cid(p, "conf")
		args := append([]string{"--runtime", p.name, "run", "--rm", "--cidfile", cf}, p.runFlags...)
		args = append(args, "--rootfs", p.rootfs, "echo", "by-name")
		before, _ := os.ReadFile(p.argvLog)
		r := p.must(ctx, 0, args...)
		if r.stdout != "by-name\n" {
			t.Errorf("stdout = %q, want %q", r.stdout, "by-name\n")
		}
		after, _ := os.ReadFile(p.argvLog)
		if id := readCID(cf); !strings.Contains(string(after[len(before):]), "create ") || !strings.Contains(string(after[len(before):]), id) {
			t.Errorf("--runtime %s did not use the [engine.runtimes] path %s; new calls:\n%s", p.name, p.runtime, after[len(before):])
		}
		p.assertGone(ctx, readCID(cf), 0)
	})

	sub("tty", func(t *testing.T, p *podman) {
		cf := cid(p, "tty")
		argv := p.argv(append(p.runArgs("--rm", "-t", "--cidfile", cf), "sh", "-c", "tty; test -t 0 && echo stdin-is-a-tty; test -t 1 && echo stdout-is-a-tty; exit 3")...)
		r := runPTY(ctx, p.spec(), argv...)
		if r.code != 3 {
			t.Errorf("want exit code 3\n%s\n%s", r, p.diag())
		}
		for _, want := range []string{"/dev/pts/0", "stdin-is-a-tty", "stdout-is-a-tty"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("terminal output lacks %q\n%s\n%s", want, r, p.diag())
			}
		}
		id := readCID(cf)
		if !regexp.MustCompile(`(?m)(^|\s)create .*--console-socket \S+ ` + id + `$`).MatchString(tail(p.argvLog, 100)) {
			t.Errorf("create was not called with --console-socket; calls:\n%s", p.diag())
		}
		p.assertGone(ctx, id, 0)
	})

	sub("exec-pause-stop", func(t *testing.T, p *podman) {
		name := "det" + randomSuffix()
		script := `trap 'exit 42' TERM; while :; do sleep 0.1; done`
		r := p.must(ctx, 0, append(p.runArgs("-d", "--name", name), "sh", "-c", script)...)
		id := strings.TrimSpace(r.stdout)
		pid, _ := strconv.Atoi(p.inspect(ctx, name, "{{.State.Pid}}"))
		if pid <= 0 || !pidAlive(pid) {
			t.Fatalf("container pid %d not alive on the host\n%s", pid, p.diag())
		}
		if st := p.inspect(ctx, name, "{{.State.Status}}"); st != "running" {
			t.Errorf("status %q, want running", st)
		}

		r = p.must(ctx, 5, "exec", name, "sh", "-c", "echo exec-out; exit 5")
		if r.stdout != "exec-out\n" {
			t.Errorf("exec stdout = %q, want %q", r.stdout, "exec-out\n")
		}
		if !regexp.MustCompile(`(?m)(^|\s)exec .*--process \S+ .*--detach ` + id + `$`).MatchString(tail(p.argvLog, 100)) {
			t.Errorf("exec not called with --process F --detach ID; calls:\n%s", p.diag())
		}
		if r := runPTY(ctx, p.spec(), p.argv("exec", "-t", name, "sh", "-c", "tty; exit 4")...); r.code != 4 || !strings.Contains(r.stdout, "/dev/pts/") {
			t.Errorf("exec -t: want exit 4 and a /dev/pts/N tty\n%s\n%s", r, p.diag())
		}

		if !p.rootless { // rootless podman has no cgroups on this cgroup v1 host
			p.must(ctx, 0, "pause", name)
			if st := p.inspect(ctx, name, "{{.State.Status}}"); st != "paused" {
				t.Errorf("after pause status %q, want paused\n%s", st, p.diag())
			}
			if fs, err := freezerState(pid); err != nil || fs != "FROZEN" {
				t.Errorf("after pause host freezer state of pid %d = %q (%v), want FROZEN", pid, fs, err)
			}
			p.must(ctx, 0, "unpause", name)
			if st := p.inspect(ctx, name, "{{.State.Status}}"); st != "running" {
				t.Errorf("after unpause status %q, want running\n%s", st, p.diag())
			}
			if fs, err := freezerState(pid); err != nil || fs != "THAWED" {
				t.Errorf("after unpause host freezer state of pid %d = %q (%v), want THAWED", pid, fs, err)
			}
		}

		// stop sends SIGTERM through the runtime; the trap exits 42.
		p.must(ctx, 0, "stop", "--time", "10", name)
		if code := p.inspect(ctx, name, "{{.State.ExitCode}}"); code != "42" {
			t.Errorf("exit code after stop %s, want 42 (SIGTERM trap)\n%s", code, p.diag())
		}
		if !regexp.MustCompile(`(?m)(^|\s)kill ` + id + ` (15|TERM|SIGTERM)$`).MatchString(tail(p.argvLog, 100)) {
			t.Errorf("stop did not call `kill ID 15`; calls:\n%s", p.diag())
		}
		p.must(ctx, 0, "rm", name)
		p.assertGone(ctx, id, pid)
	})

	sub("openshell-supervisor-privileges", func(t *testing.T, p *podman) {
		// What OpenShell's Podman driver asks for its supervisor container:
		// user 0, some default capabilities dropped, others added,
		// no_new_privileges, no seccomp filter (NVIDIA/OpenShell 2f7fb65,
		// crates/openshell-driver-podman/src/container.rs). The runtime
		// must apply exactly what podman wrote in config.json: compared
		// from the host with /proc/PID/status.
		// No --runtime: OpenShell's Podman driver goes through podman's API,
		// so the runtime is containers.conf's engine.runtime.
		name := "osh" + randomSuffix()
		p.must(ctx, 0, append(p.defaultRunArgs("-d", "--name", name, "--user", "0:0",
			"--cap-drop", "DAC_OVERRIDE,FSETID,KILL,NET_BIND_SERVICE,NET_RAW,SETFCAP,SYS_CHROOT",
			"--cap-add", "SYS_ADMIN,NET_ADMIN,SYS_PTRACE,SYSLOG,DAC_READ_SEARCH,SETPCAP",
			"--security-opt", "seccomp=unconfined", "--security-opt", "no-new-privileges"), "sleep", "1000")...)
		control := "oshc" + randomSuffix()
		p.must(ctx, 0, append(p.defaultRunArgs("-d", "--name", control), "sleep", "1000")...)
		defer p.run(ctx, "rm", "-f", "-t", "0", name, control)
		p.ranByRuntime(ctx, name)
		p.ranByRuntime(ctx, control)
		check := func(name, wantSeccomp, wantNNP string) {
			pid, _ := strconv.Atoi(p.inspect(ctx, name, "{{.State.Pid}}"))
			cfgPath := p.inspect(ctx, name, "{{.OCIConfigPath}}")
			data, err := os.ReadFile(cfgPath)
			if err != nil {
				t.Fatalf("podman's config.json: %v", err)
			}
			var cfg struct {
				Process struct {
					NoNewPrivileges bool
					Capabilities    struct {
						Bounding, Effective []string
					}
				}
				Linux struct {
					Seccomp *json.RawMessage
				}
			}
			if err := json.Unmarshal(data, &cfg); err != nil {
				t.Fatal(err)
			}
			status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				t.Fatal(err)
			}
			field := func(k string) string {
				m := regexp.MustCompile(`(?m)^` + k + `:\s*(\S+)`).FindSubmatch(status)
				if m == nil {
					return ""
				}
				return string(m[1])
			}
			for k, caps := range map[string][]string{"CapEff": cfg.Process.Capabilities.Effective, "CapBnd": cfg.Process.Capabilities.Bounding} {
				if got, want := field(k), capMask(t, caps); got != want {
					t.Errorf("%s: host %s = %s, config.json %v = %s\n%s", name, k, got, caps, want, p.diag())
				}
			}
			if got := field("Seccomp"); got != wantSeccomp {
				t.Errorf("%s: host Seccomp mode %s, want %s (config.json seccomp present: %v)", name, got, wantSeccomp, cfg.Linux.Seccomp != nil)
			}
			if got := field("NoNewPrivs"); got != wantNNP {
				t.Errorf("%s: host NoNewPrivs %s, want %s (config.json noNewPrivileges %v)", name, got, wantNNP, cfg.Process.NoNewPrivileges)
			}
			if name == control {
				return
			}
			have := strings.Join(cfg.Process.Capabilities.Effective, ",")
			for _, c := range []string{"CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_SYS_PTRACE", "CAP_SYSLOG", "CAP_DAC_READ_SEARCH", "CAP_SETPCAP", "CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_FOWNER"} {
				if !strings.Contains(have, c) {
					t.Errorf("podman did not ask for %s: %s", c, have)
				}
			}
			for _, c := range []string{"CAP_DAC_OVERRIDE", "CAP_KILL", "CAP_SYS_CHROOT"} {
				if strings.Contains(have, c+",") || strings.HasSuffix(have, c) {
					t.Errorf("podman kept dropped %s: %s", c, have)
				}
			}
		}
		check(name, "0", "1")
		check(control, "2", "0")
	})

	sub("kill", func(t *testing.T, p *podman) {
		name := "kill" + randomSuffix()
		r := p.must(ctx, 0, append(p.runArgs("-d", "--name", name), "sleep", "1000")...)
		id := strings.TrimSpace(r.stdout)
		pid, _ := strconv.Atoi(p.inspect(ctx, name, "{{.State.Pid}}"))
		p.must(ctx, 0, "kill", name)
		if r := p.must(ctx, 0, "wait", name); strings.TrimSpace(r.stdout) != "137" {
			t.Errorf("podman wait after kill = %q, want 137\n%s", r.stdout, p.diag())
		}
		p.must(ctx, 0, "rm", name)
		p.assertGone(ctx, id, pid)
	})
}

// capMask is the /proc/PID/status hex mask of a list of CAP_ names.
func capMask(t *testing.T, caps []string) string {
	t.Helper()
	var m uint64
	for _, c := range caps {
		n, ok := capNumbers[c]
		if !ok {
			t.Fatalf("unknown capability %s", c)
		}
		m |= 1 << n
	}
	return fmt.Sprintf("%016x", m)
}

var capNumbers = map[string]uint{
	"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3, "CAP_FSETID": 4,
	"CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SETPCAP": 8, "CAP_LINUX_IMMUTABLE": 9,
	"CAP_NET_BIND_SERVICE": 10, "CAP_NET_BROADCAST": 11, "CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13,
	"CAP_IPC_LOCK": 14, "CAP_IPC_OWNER": 15, "CAP_SYS_MODULE": 16, "CAP_SYS_RAWIO": 17, "CAP_SYS_CHROOT": 18,
	"CAP_SYS_PTRACE": 19, "CAP_SYS_PACCT": 20, "CAP_SYS_ADMIN": 21, "CAP_SYS_BOOT": 22, "CAP_SYS_NICE": 23,
	"CAP_SYS_RESOURCE": 24, "CAP_SYS_TIME": 25, "CAP_SYS_TTY_CONFIG": 26, "CAP_MKNOD": 27, "CAP_LEASE": 28,
	"CAP_AUDIT_WRITE": 29, "CAP_AUDIT_CONTROL": 30, "CAP_SETFCAP": 31, "CAP_MAC_OVERRIDE": 32,
	"CAP_MAC_ADMIN": 33, "CAP_SYSLOG": 34, "CAP_WAKE_ALARM": 35, "CAP_BLOCK_SUSPEND": 36,
	"CAP_AUDIT_READ": 37, "CAP_PERFMON": 38, "CAP_BPF": 39, "CAP_CHECKPOINT_RESTORE": 40,
}

func TestPodmanRoot(t *testing.T) {
	p := newPodman(t, false)
	podmanSubtests(t, p)
}

func TestPodmanRootless(t *testing.T) {
	p := newPodman(t, true)
	podmanSubtests(t, p)
}
