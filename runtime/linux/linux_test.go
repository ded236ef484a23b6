//go:build linux

package linux

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/runtimetest"
)

// TestMain lets libcontainer re-execute this test binary as the init.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		Init()
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
