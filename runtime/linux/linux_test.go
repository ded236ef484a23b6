//go:build linux

package linux

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/runtimetest"
)

// TestMain lets libcontainer re-execute this test binary as the prestart
// hook shim (as the init, it is containerinit's, imported by this package;
// as the lifetime guard, this package's), and TestGuardProcess run it as
// a guarded runner.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == HookStateArg {
		err := HookShim(os.Args[2:], os.Stdin)
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if os.Getenv(guardRunnerEnv) != "" {
		guardRunner()
	}
	os.Exit(m.Run())
}

func TestConformanceRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs real containers with libcontainer (the rootless path is covered by tests/ as an unprivileged user)")
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("needs busybox-static for the test rootfs: hack/install-deps.sh test")
	}
	rootfs := busyboxRootfs(t, bb)
	runtimetest.Run(t, runtimetest.Harness{
		New: func(t *testing.T) runtime.Runtime {
			r, err := New(runtime.Options{Root: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		Bundle: func(t *testing.T, args ...string) string {
			dir := t.TempDir()
			s := ExampleSpec(false)
			s.Root.Path = rootfs
			s.Process.Terminal = false
			s.Process.Args = args
			writeSpec(t, dir, s)
			return dir
		},
		Processes: true,
	})
}

func busyboxRootfs(t *testing.T, bb string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"bin", "proc", "dev", "sys", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin/busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"sh", "sleep", "true", "echo", "cat"} {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func writeSpec(t *testing.T, dir string, s *specs.Spec) {
	t.Helper()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, runtime.ConfigName), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sleepSpec is the spec of a real container running `sleep 30` in a
// busybox rootfs; it skips the test unless root with busybox-static.
func sleepSpec(t *testing.T) *specs.Spec {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs a real container")
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("needs busybox-static for the test rootfs")
	}
	s := ExampleSpec(false)
	s.Root.Path = busyboxRootfs(t, bb)
	s.Process.Terminal = false
	s.Process.Args = []string{"sleep", "30"}
	return s
}

// TestPoststartHooks checks the runtime-spec semantics libcontainer does
// not have: prestart hooks get the state "created" (libcontainer says
// "creating"), poststart hooks run at start (not create), with the state
// "running", and a failing one is only a warning.
func TestPoststartHooks(t *testing.T) {
	s := sleepSpec(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "hook.out")
	stopped := filepath.Join(dir, "poststop.out")
	pre := filepath.Join(dir, "prestart.out")
	s.Hooks = &specs.Hooks{Prestart: []specs.Hook{
		{Path: "/bin/sh", Args: []string{"sh", "-c", "cat > " + pre + "; echo \"$0 $HOOKENV\" > " + pre + ".argv", "arg1"}, Env: []string{"HOOKENV=env1"}},
	}, Poststart: []specs.Hook{
		{Path: "/bin/false"},
		{Path: "/bin/sh", Args: []string{"sh", "-c", "cat > " + out}},
	}, Poststop: []specs.Hook{
		{Path: "/bin/false"},
		{Path: "/bin/sh", Args: []string{"sh", "-c", "cat > " + stopped}},
	}}
	writeSpec(t, dir, s)
	var warns []string
	r, err := New(runtime.Options{Root: t.TempDir(), Warn: func(m string) { warns = append(warns, m) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := r.Create(ctx, "hooks", runtime.CreateOpts{Bundle: dir}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Delete(ctx, "hooks", true) })
	data, err := os.ReadFile(pre)
	if err != nil {
		t.Fatalf("prestart hook did not run: %v", err)
	}
	var pst specs.State
	if err := json.Unmarshal(data, &pst); err != nil || pst.Status != specs.StateCreated || pst.ID != "hooks" || pst.Pid <= 0 {
		t.Fatalf("prestart stdin = %s (%v), want the state with status created and the init's pid", data, err)
	}
	if argv, _ := os.ReadFile(pre + ".argv"); strings.TrimSpace(string(argv)) != "arg1 env1" {
		t.Fatalf("prestart hook saw $0 and HOOKENV = %q, want the hook's own arguments and environment (arg1 env1)", argv)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("poststart hook ran at create")
	}
	if err := r.Start(ctx, "hooks"); err != nil {
		t.Fatalf("start with a failing poststart hook: %v", err)
	}
	data, err = os.ReadFile(out)
	if err != nil {
		t.Fatalf("second poststart hook did not run: %v", err)
	}
	var st specs.State
	if err := json.Unmarshal(data, &st); err != nil || st.Status != specs.StateRunning || st.ID != "hooks" {
		t.Fatalf("hook stdin = %s (%v), want the state with status running", data, err)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "poststart hook #0") {
		t.Fatalf("warnings = %q, want one for hook #0", warns)
	}
	if err := r.Delete(ctx, "hooks", true); err != nil {
		t.Fatalf("delete with a failing poststop hook: %v", err)
	}
	data, err = os.ReadFile(stopped)
	if err != nil {
		t.Fatalf("second poststop hook did not run: %v", err)
	}
	if err := json.Unmarshal(data, &st); err != nil || st.Status != specs.StateStopped {
		t.Fatalf("poststop stdin = %s (%v), want status stopped", data, err)
	}
	if len(warns) != 2 || !strings.Contains(warns[1], "poststop hook #0") {
		t.Fatalf("warnings = %q, want a second one for poststop hook #0", warns)
	}
}

// TestDeviceRulesInOrder: on a cgroup v1 host the devices cgroup lists the
// spec's rules in the order given (runtime-tools linux_cgroups_devices),
// followed by the default devices; libcontainer alone writes them sorted
// its own way.
func TestDeviceRulesInOrder(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/devices/devices.list"); err != nil {
		t.Skip("needs a cgroup v1 devices hierarchy at /sys/fs/cgroup/devices")
	}
	s := sleepSpec(t)
	dir := t.TempDir()
	i64 := func(v int64) *int64 { return &v }
	s.Linux.Resources = &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{
		{Allow: false, Access: "rwm"},
		{Allow: true, Type: "c", Major: i64(10), Minor: i64(229), Access: "rwm"},
		{Allow: true, Type: "b", Major: i64(8), Minor: i64(20), Access: "rw"},
		{Allow: true, Type: "b", Major: i64(10), Minor: i64(200), Access: "r"},
	}}
	writeSpec(t, dir, s)
	r, err := New(runtime.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, verb := range []string{"create", "run"} {
		id := "devices-" + verb
		if verb == "create" {
			err = r.Create(ctx, id, runtime.CreateOpts{Bundle: dir})
		} else {
			_, err = r.Run(ctx, id, runtime.RunOpts{CreateOpts: runtime.CreateOpts{Bundle: dir}, Detach: true})
		}
		if err != nil {
			t.Fatalf("%s: %v", verb, err)
		}
		t.Cleanup(func() { _ = r.Delete(ctx, id, true) })
		st, err := r.State(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", st.Pid))
		if err != nil {
			t.Fatal(err)
		}
		var rel string
		for _, l := range strings.Split(string(cg), "\n") {
			if p := strings.SplitN(l, ":", 3); len(p) == 3 && p[1] == "devices" {
				rel = p[2]
			}
		}
		list, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/devices", rel, "devices.list"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(list)), "\n")
		want := []string{"c 10:229 rwm", "b 8:20 rw", "b 10:200 r"}
		if len(lines) < len(want) || strings.Join(lines[:len(want)], "|") != strings.Join(want, "|") {
			t.Errorf("%s: devices.list starts %q, want the spec's rules in order %q", verb, lines, want)
		}
		if !strings.Contains(string(list), "c 1:3 rwm") {
			t.Errorf("%s: devices.list lacks the default /dev/null rule: %q", verb, lines)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the runtime's copy and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunReported: a status the caller reports (the function RunOpts.Report
// hands it, offered before Started) fills Exit from the cgroups and calls
// Exited once the program's output has all been written, while the
// container's first process still runs (here it goes on for 2 s with its
// output elsewhere); Run still waits for it. A report after Exited does
// nothing.
func TestRunReported(t *testing.T) {
	s := sleepSpec(t)
	s.Process.Args = []string{"sh", "-c", "i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; echo out; echo err >&2; exec sleep 2 >/dev/null 2>&1"}
	r, err := New(runtime.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !r.CgroupLimits() {
		t.Skip("skipped: no cgroups of its own for a container here (the report needs the CPU accounting cgroup)")
	}
	dir := t.TempDir()
	writeSpec(t, dir, s)
	var out, errb syncBuffer
	var info runtime.ExitInfo
	var report func(int)
	offered := make(chan func(int), 1)
	type exited struct {
		at        time.Duration
		out, errb string
		info      runtime.ExitInfo
	}
	got := make(chan exited, 1)
	begin := time.Now()
	go func() {
		report := <-offered
		time.Sleep(300 * time.Millisecond) // the program has printed by then
		report(7)
	}()
	status, err := r.Run(context.Background(), "reported", runtime.RunOpts{
		CreateOpts: runtime.CreateOpts{Bundle: dir, Stdio: runtime.Stdio{Stdout: &out, Stderr: &errb}},
		Exit:       &info,
		Report:     func(f func(int)) { report = f; offered <- f },
		Started: func(int) {
			if report == nil {
				t.Error("Started before Report")
			}
		},
		Exited: func(error) {
			got <- exited{time.Since(begin), out.String(), errb.String(), info}
		},
	})
	ran := time.Since(begin)
	if err != nil || status != 0 {
		t.Fatalf("Run: %d, %v", status, err)
	}
	e := <-got
	if e.at > ran-time.Second {
		t.Errorf("Exited at %s, Run returned at %s: not before the first process's end", e.at, ran)
	}
	if e.out != "out\n" || e.errb != "err\n" {
		t.Errorf("output at Exited: %q, %q; want all of it", e.out, e.errb)
	}
	if e.info.Status != 7 || !e.info.Cgroups || e.info.CPU <= 0 || e.info.MaxRSS <= 0 {
		t.Errorf("Exit at Exited: %+v; want status 7, cgroups, CPU time and a memory peak", e.info)
	}
	// The exact counter (ns in v1's cpuacct.usage, µs in v2's cpu.stat),
	// not a count of scheduler ticks (v1's usage_user and usage_sys: a
	// whole number of ticks, so of milliseconds, whatever HZ is).
	if e.info.CPU%time.Millisecond == 0 {
		t.Errorf("CPU time at Exited %v is a whole number of milliseconds: scheduler ticks, not the exact counter", e.info.CPU)
	}
	if info.Status != 7 {
		t.Errorf("Exit was overwritten after Exited: %+v", info)
	}
	report(9) // after Run: nothing happens
	if info.Status != 7 || len(got) != 0 {
		t.Errorf("a report after Exited changed Exit (%+v) or called Exited again", info)
	}
}
