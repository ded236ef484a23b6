//go:build darwin || linux

package darwin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/seatbelt"
)

// testInitEnv makes the test binary act as `skillrun init`.
const testInitEnv = "SKILLRUN_DARWIN_TEST_INIT"

func TestMain(m *testing.M) {
	if os.Getenv(testInitEnv) == "1" {
		err := Init()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// testEngine runs containers without sandbox-exec: the init is this test
// binary, and it execs process.args directly.
func testEngine(t *testing.T, cfg Config) (*engine, *[]string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var warns []string
	e, err := newEngine(runtime.Options{Root: filepath.Join(t.TempDir(), "root"), Warn: func(m string) {
		mu.Lock()
		warns = append(warns, m)
		mu.Unlock()
	}}, cfg, launcher{
		initPath: exe,
		initArgs: []string{"skillrun", "init"},
		initEnv:  []string{testInitEnv + "=1"},
		command:  func(p *seatbelt.Profile, _ string) []string { return p.Args },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Leave nothing running.
		states, _, _ := e.List(context.Background())
		for _, s := range states {
			e.Delete(context.Background(), s.ID, true)
		}
	})
	return e, &warns
}

// testSpec runs script with /bin/sh in dir, with a network namespace and a
// read-only root.
func testSpec(dir, script string) *specs.Spec {
	return &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			User: specs.User{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())},
			Args: []string{"sh", "-c", script},
			Env:  []string{"PATH=/usr/bin:/bin", "GREETING=hello world"},
			Cwd:  dir,
		},
		Root:        &specs.Root{Path: dir, Readonly: true},
		Annotations: map[string]string{"org.example": "x"},
		Linux:       &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: specs.NetworkNamespace}}},
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func status(t *testing.T, e *engine, id string) string {
	t.Helper()
	st, err := e.State(context.Background(), id)
	if err != nil {
		t.Fatalf("state %s: %v", id, err)
	}
	return st.Status
}

func TestLifecycle(t *testing.T) {
	e, _ := testEngine(t, Config{})
	ctx := context.Background()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	pidFile := filepath.Join(dir, "init.pid")
	s := testSpec(dir, `echo "$$ $GREETING $(pwd)" > out; exec sleep 60`)
	if err := e.Create(ctx, "c1", runtime.CreateOpts{Bundle: dir, Spec: s, PidFile: pidFile}); err != nil {
		t.Fatal(err)
	}
	st, err := e.State(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != runtime.StatusCreated || st.Pid <= 0 || st.Bundle != dir || st.Rootfs != dir || st.Annotations["org.example"] != "x" {
		t.Fatalf("state after create: %+v", st)
	}
	if b, err := os.ReadFile(pidFile); err != nil || string(b) != strconv.Itoa(st.Pid) {
		t.Fatalf("pid file %q (%v), want %d without newline", b, err, st.Pid)
	}
	// The init is blocked: nothing ran yet.
	time.Sleep(50 * time.Millisecond)
	if _, err := os.Stat(out); err == nil {
		t.Fatal("the process ran before start")
	}
	if err := e.Start(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if got := status(t, e, "c1"); got != runtime.StatusRunning {
		t.Fatalf("status after start %q", got)
	}
	waitFor(t, "output", func() bool { b, _ := os.ReadFile(out); return len(b) > 0 })
	b, _ := os.ReadFile(out)
	// The recorded PID is the process itself (exec chain, same PID), env
	// and cwd as given.
	if want := fmt.Sprintf("%d hello world %s\n", st.Pid, dir); string(b) != want {
		t.Errorf("process wrote %q, want %q", b, want)
	}
	if err := e.Start(ctx, "c1"); err == nil {
		t.Error("second start succeeded")
	}
	if err := e.Delete(ctx, "c1", false); !errors.Is(err, runtime.ErrRunning) {
		t.Errorf("delete of a running container: %v, want ErrRunning", err)
	}
	if err := e.Kill(ctx, "c1", syscall.SIGTERM, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "stopped", func() bool { return status(t, e, "c1") == runtime.StatusStopped })
	if st, _ := e.State(ctx, "c1"); st.Pid != 0 {
		t.Errorf("stopped container reports pid %d, want 0", st.Pid)
	}
	if err := e.Kill(ctx, "c1", syscall.SIGTERM, false); !errors.Is(err, runtime.ErrNotRunning) {
		t.Errorf("kill of a stopped container: %v", err)
	}
	if err := e.Start(ctx, "c1"); !errors.Is(err, runtime.ErrNotRunning) {
		t.Errorf("start of a stopped container: %v", err)
	}
	if err := e.Delete(ctx, "c1", false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.root, "c1")); !os.IsNotExist(err) {
		t.Errorf("state directory left: %v", err)
	}
	for name, err := range map[string]error{
		"state":  func() error { _, err := e.State(ctx, "c1"); return err }(),
		"delete": e.Delete(ctx, "c1", false),
		"start":  e.Start(ctx, "c1"),
		"kill":   e.Kill(ctx, "c1", syscall.SIGKILL, true),
	} {
		if !errors.Is(err, runtime.ErrNotExist) || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("%s after delete: %v, want ErrNotExist", name, err)
		}
	}
	// runc: delete --force of a missing container succeeds.
	if err := e.Delete(ctx, "c1", true); err != nil {
		t.Errorf("delete --force after delete: %v", err)
	}
}

func TestCreateErrors(t *testing.T) {
	e, _ := testEngine(t, Config{})
	ctx := context.Background()
	dir := t.TempDir()
	if err := e.Create(ctx, "../x", runtime.CreateOpts{Spec: testSpec(dir, "true")}); !errors.Is(err, runtime.ErrInvalidID) {
		t.Errorf("bad id: %v", err)
	}
	if err := e.Create(ctx, "dup", runtime.CreateOpts{Bundle: dir, Spec: testSpec(dir, "sleep 60")}); err != nil {
		t.Fatal(err)
	}
	if err := e.Create(ctx, "dup", runtime.CreateOpts{Bundle: dir, Spec: testSpec(dir, "true")}); !errors.Is(err, runtime.ErrExist) {
		t.Errorf("duplicate: %v", err)
	}
	// A created container is deleted without force (its init killed).
	pid := mustState(t, e, "dup").Pid
	if err := e.Delete(ctx, "dup", false); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		if start, zombie, _ := procInfo(pid); !zombie && start != 0 {
			t.Errorf("init %d still alive after delete", pid)
		}
	}

	bad := map[string]*specs.Spec{
		"command not found": testSpec(dir, "true"),
		"bad cwd":           testSpec(dir, "true"),
		"rejected field":    testSpec(dir, "true"),
		"bad rlimit":        testSpec(dir, "true"),
	}
	bad["command not found"].Process.Args = []string{"no-such-command-skillrun"}
	bad["bad cwd"].Process.Cwd = filepath.Join(dir, "missing")
	bad["rejected field"].Hooks = &specs.Hooks{Prestart: []specs.Hook{{Path: "/bin/true"}}}
	bad["bad rlimit"].Process.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 10, Hard: 5}}
	for name, s := range bad {
		err := e.Create(ctx, "bad", runtime.CreateOpts{Bundle: dir, Spec: s})
		if err == nil {
			t.Errorf("%s: create succeeded", name)
			e.Delete(ctx, "bad", true)
			continue
		}
		if _, err := os.Stat(filepath.Join(e.root, "bad")); !os.IsNotExist(err) {
			t.Errorf("%s: failed create left its directory", name)
		}
		if name == "rejected field" && !errors.Is(err, seatbelt.ErrRejected) {
			t.Errorf("rejected field: %v, want seatbelt.ErrRejected", err)
		}
	}
	// Missing bundle.
	if err := e.Create(ctx, "nob", runtime.CreateOpts{Bundle: filepath.Join(dir, "nope")}); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("missing bundle: %v", err)
	}
}

func TestAcceptDegradation(t *testing.T) {
	e, warns := testEngine(t, Config{AcceptDegradation: true})
	dir := t.TempDir()
	s := testSpec(dir, "true")
	s.Hooks = &specs.Hooks{Prestart: []specs.Hook{{Path: "/bin/true"}}}
	if err := e.Create(context.Background(), "acc", runtime.CreateOpts{Bundle: dir, Spec: s}); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range *warns {
		if strings.HasPrefix(w, "hooks.prestart: rejected: ") {
			found = true
		}
	}
	if !found {
		t.Errorf("no warning for the accepted rejected field: %q", *warns)
	}
}

func mustState(t *testing.T, e *engine, id string) *runtime.State {
	t.Helper()
	st, err := e.State(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestKillAllProcessGroup(t *testing.T) {
	e, _ := testEngine(t, Config{})
	ctx := context.Background()
	dir := t.TempDir()
	s := testSpec(dir, `sleep 60 & echo $! > child; wait`)
	if err := e.Create(ctx, "grp", runtime.CreateOpts{Bundle: dir, Spec: s}); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx, "grp"); err != nil {
		t.Fatal(err)
	}
	var childPid int
	waitFor(t, "child pid", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "child"))
		childPid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return childPid > 0
	})
	pids, err := e.Ps(ctx, "grp")
	if err != nil {
		t.Fatal(err)
	}
	init := mustState(t, e, "grp").Pid
	if !reflect.DeepEqual(pids, sortedInts(init, childPid)) {
		t.Errorf("ps = %v, want %v", pids, sortedInts(init, childPid))
	}
	if err := e.Kill(ctx, "grp", syscall.SIGKILL, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "group gone", func() bool {
		_, zombie, err := procInfo(childPid)
		return err != nil || zombie
	})
	waitFor(t, "stopped", func() bool { return status(t, e, "grp") == runtime.StatusStopped })
	// runc: --all with nothing left to signal succeeds.
	if err := e.Kill(ctx, "grp", syscall.SIGKILL, true); err != nil {
		t.Errorf("kill --all of an empty group: %v", err)
	}
}

func sortedInts(v ...int) []int { sort.Ints(v); return v }

func TestDeleteKillsLeftovers(t *testing.T) {
	e, _ := testEngine(t, Config{})
	ctx := context.Background()
	dir := t.TempDir()
	// The init exits at once, its child lives on in the group.
	s := testSpec(dir, `sleep 60 & echo $! > child`)
	if err := e.Create(ctx, "left", runtime.CreateOpts{Bundle: dir, Spec: s}); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx, "left"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "stopped", func() bool { return status(t, e, "left") == runtime.StatusStopped })
	b, _ := os.ReadFile(filepath.Join(dir, "child"))
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if child <= 0 {
		t.Fatalf("child pid %q", b)
	}
	if err := e.Delete(ctx, "left", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leftover killed", func() bool {
		_, zombie, err := procInfo(child)
		return err != nil || zombie
	})
}

func TestStartAfterInitDied(t *testing.T) {
	e, _ := testEngine(t, Config{})
	ctx := context.Background()
	dir := t.TempDir()
	if err := e.Create(ctx, "dead", runtime.CreateOpts{Bundle: dir, Spec: testSpec(dir, "true")}); err != nil {
		t.Fatal(err)
	}
	if err := e.Kill(ctx, "dead", syscall.SIGKILL, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "stopped", func() bool { return status(t, e, "dead") == runtime.StatusStopped })
	done := make(chan error, 1)
	go func() { done <- e.Start(ctx, "dead") }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("start of a container whose init died succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("start hung on the exec fifo")
	}
	// The fifo-level guard: an init that dies while start waits.
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := awaitExec(ctx, fifo, func() bool { return false }); err == nil || !strings.Contains(err.Error(), "exited before start") {
		t.Errorf("awaitExec with a dead init: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := awaitExec(cctx, fifo, func() bool { return true }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("awaitExec with a cancelled context: %v", err)
	}
}

func TestExecFailureReachesStart(t *testing.T) {
	e, _ := testEngine(t, Config{})
	ctx := context.Background()
	dir := t.TempDir()
	// Found at create (exists, executable), but not an executable format.
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte{0, 1, 2, 3}, 0o755); err != nil {
		t.Fatal(err)
	}
	s := testSpec(dir, "")
	s.Process.Args = []string{bad}
	if err := e.Create(ctx, "ef", runtime.CreateOpts{Bundle: dir, Spec: s}); err != nil {
		t.Fatal(err)
	}
	err := e.Start(ctx, "ef")
	if err == nil || !strings.Contains(err.Error(), "exec format error") {
		t.Errorf("start: %v, want the exec error", err)
	}
}

func TestRun(t *testing.T) {
	e, _ := testEngine(t, Config{})
	ctx := context.Background()
	dir := t.TempDir()
	var exit runtime.ExitInfo
	code, err := e.Run(ctx, "r1", runtime.RunOpts{CreateOpts: runtime.CreateOpts{Bundle: dir, Spec: testSpec(dir, "exit 3")}, Exit: &exit})
	if err != nil || code != 3 || exit.Status != 3 || exit.Wall <= 0 {
		t.Errorf("run exit 3: %d %v %+v", code, err, exit)
	}
	if _, err := e.State(ctx, "r1"); !errors.Is(err, runtime.ErrNotExist) {
		t.Errorf("run did not delete: %v", err)
	}
	code, err = e.Run(ctx, "r2", runtime.RunOpts{CreateOpts: runtime.CreateOpts{Bundle: dir, Spec: testSpec(dir, "kill -9 $$")}, Keep: true, Exit: &exit})
	if err != nil || code != 128+9 || exit.Signal != syscall.SIGKILL {
		t.Errorf("run killed: %d %v %+v", code, err, exit)
	}
	if got := status(t, e, "r2"); got != runtime.StatusStopped {
		t.Errorf("kept container status %q", got)
	}
	// Rlimits and umask are applied before exec.
	s := testSpec(dir, `ulimit -n > limits; umask >> limits`)
	s.Process.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 77, Hard: 77}}
	um := uint32(0o027)
	s.Process.User.Umask = &um
	if code, err := e.Run(ctx, "r3", runtime.RunOpts{CreateOpts: runtime.CreateOpts{Bundle: dir, Spec: s}}); err != nil || code != 0 {
		t.Fatalf("run limits: %d %v", code, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "limits")); string(b) != "77\n0027\n" {
		t.Errorf("limits %q", b)
	}
	// Signals are forwarded.
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	code, err = e.Run(ctx, "r4", runtime.RunOpts{CreateOpts: runtime.CreateOpts{Bundle: dir, Spec: testSpec(dir, "exec sleep 60")}, Signals: sigs})
	if err != nil || code != 128+int(syscall.SIGTERM) {
		t.Errorf("run with SIGTERM forwarded: %d %v", code, err)
	}
	// Cancellation kills and deletes.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := e.Run(cctx, "r5", runtime.RunOpts{CreateOpts: runtime.CreateOpts{Bundle: dir, Spec: testSpec(dir, "exec sleep 60")}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled run: %v", err)
	}
	if _, err := e.State(ctx, "r5"); !errors.Is(err, runtime.ErrNotExist) {
		t.Errorf("cancelled run left state: %v", err)
	}
	// Detached.
	if code, err := e.Run(ctx, "r6", runtime.RunOpts{CreateOpts: runtime.CreateOpts{Bundle: dir, Spec: testSpec(dir, "exec sleep 60")}, Detach: true}); err != nil || code != 0 {
		t.Fatalf("detached run: %d %v", code, err)
	}
	if got := status(t, e, "r6"); got != runtime.StatusRunning {
		t.Errorf("detached status %q", got)
	}
}

func TestListAndStateJSON(t *testing.T) {
	e, warns := testEngine(t, Config{})
	ctx := context.Background()
	dir := t.TempDir()
	for _, id := range []string{"b", "a"} {
		if err := e.Create(ctx, id, runtime.CreateOpts{Bundle: dir, Spec: testSpec(dir, "sleep 60")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(e.root, "broken"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.root, "broken", stateName), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	list, lwarns, err := e.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != "a" || list[1].ID != "b" || len(lwarns) != 1 {
		t.Errorf("list %+v warnings %v", list, lwarns)
	}
	b, err := json.Marshal(list[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"ociVersion", "id", "pid", "status", "bundle", "rootfs", "created", "annotations", "owner"} {
		if _, ok := m[k]; !ok {
			t.Errorf("state JSON lacks %q: %s", k, b)
		}
	}
	if len(m) != 9 {
		t.Errorf("state JSON has extra keys: %s", b)
	}
	// The state file records the command and start time for the back end.
	raw, _ := os.ReadFile(filepath.Join(e.root, "a", stateName))
	if !strings.Contains(string(raw), `"skillrun_start_time"`) || !strings.Contains(string(raw), `"skillrun_command":["sh","-c","sleep 60"]`) {
		t.Errorf("state file %s", raw)
	}
	// Warnings from the translation reached Options.Warn.
	if len(*warns) == 0 {
		t.Error("no translation warnings reported (root.path is always degraded)")
	}
}

func TestUnsupportedVerbs(t *testing.T) {
	e, _ := testEngine(t, Config{})
	ctx := context.Background()
	errs := map[string]error{
		"pause":  e.Pause(ctx, "x"),
		"resume": e.Resume(ctx, "x"),
		"update": e.Update(ctx, "x", &specs.LinuxResources{}),
		"events": e.Events(ctx, "x", runtime.EventsOpts{}, func(runtime.Event) error { return nil }),
	}
	_, errs["exec"] = e.Exec(ctx, "x", runtime.ExecOpts{})
	for verb, err := range errs {
		if !errors.Is(err, runtime.ErrNotSupported) || !strings.Contains(err.Error(), verb) || !strings.Contains(err.Error(), "darwin") {
			t.Errorf("%s: %v", verb, err)
		}
	}
	f, err := e.Features()
	if err != nil || f.OCIVersionMax != specs.Version || f.Hooks == nil || len(f.Hooks) != 0 {
		t.Errorf("features %+v %v", f, err)
	}
	if err := e.Create(ctx, "tty", runtime.CreateOpts{ConsoleSocket: "/x.sock"}); !errors.Is(err, runtime.ErrNotSupported) {
		t.Errorf("console socket: %v", err)
	}
}

func TestNewEngineRoot(t *testing.T) {
	if _, err := newEngine(runtime.Options{Root: "relative"}, Config{}, launcher{}); err == nil {
		t.Error("relative root accepted")
	}
	root := filepath.Join(t.TempDir(), "a", "b")
	if _, err := newEngine(runtime.Options{Root: root}, Config{}, launcher{}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(root); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("root %v %v, want a 0700 directory", fi, err)
	}
	e, err := newEngine(runtime.Options{Root: root, SystemdCgroup: true}, Config{}, launcher{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Create(context.Background(), "s", runtime.CreateOpts{}); !errors.Is(err, runtime.ErrNotSupported) {
		t.Errorf("systemd cgroup: %v", err)
	}
}

func TestConcurrentDeletes(t *testing.T) {
	e, _ := testEngine(t, Config{})
	ctx := context.Background()
	dir := t.TempDir()
	if err := e.Create(ctx, "cc", runtime.CreateOpts{Bundle: dir, Spec: testSpec(dir, "sleep 60")}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.Delete(ctx, "cc", true)
		}()
	}
	wg.Wait()
	// runc: delete --force of a container that is already gone succeeds,
	// so every one of the racing deletes must.
	for _, err := range errs {
		if err != nil {
			t.Errorf("concurrent delete --force: %v", err)
		}
	}
	if _, err := e.State(ctx, "cc"); !errors.Is(err, runtime.ErrNotExist) {
		t.Errorf("state after deletes: %v", err)
	}
	if _, err := os.Stat(e.dir("cc")); !os.IsNotExist(err) {
		t.Errorf("state directory left behind: %v", err)
	}
}

func TestInitWithoutCreate(t *testing.T) {
	t.Setenv(initFDsEnv, "")
	if err := Init(); err == nil || !strings.Contains(err.Error(), "not started by skillrun create") {
		t.Errorf("Init by hand: %v", err)
	}
	for _, bad := range []string{"3", "x,4", "1,2", "3,"} {
		if _, _, err := parseInitFDs(bad); err == nil {
			t.Errorf("parseInitFDs(%q) accepted", bad)
		}
	}
}
