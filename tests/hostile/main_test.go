//go:build integration

// Package hostile_test feeds hostile input to every verb of the skillrun
// binary (runtime verbs and `skill validate|inspect|list|bundle|run`) and
// checks robustness (concurrent skill runs, the runtime SIGKILLed at random
// points, corrupt state). Every case checks the exit code, that the error
// is one line naming the field or file, and, from the host, that nothing
// was left behind: state, mounts, processes, cgroups, bundle folders.
//
// The binary comes from $SKILLRUN (default <repo>/bin/skillrun). Cases run
// as root and as the unprivileged user $SKILLRUN_TEST_USER (default
// skillrun-test); a mode that cannot run is skipped with the reason.
package hostile_test

import (
	"fmt"
	"github.com/skillrun/skillrun/tests/internal/hostcheck"
	"github.com/skillrun/skillrun/tests/internal/rootfs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

var (
	// binary is the absolute path of the skillrun under test.
	binary string
	// repo is the repository root.
	repo string
	// tmpBase holds every test's files (0755: the test user traverses it).
	tmpBase string
	// rootfsTemplate is a busybox rootfs cloned into every bundle.
	rootfsTemplate string
	// setupErr is why the suite cannot run; every test reports it.
	setupErr error
	// stage holds copies of what the rootless test user cannot reach
	// (the binary and example skills of a checkout in a closed folder).
	stage hostcheck.Stage
)

func TestMain(m *testing.M) {
	setupErr = setup()
	// Like containerd's shim, be the subreaper of what the runtime leaves
	// (a SIGKILLed runtime's container init is reparented to us), and reap
	// such orphans so that their exit can be observed.
	if setupErr == nil {
		setupErr = hostcheck.Subreap(binary)
	}
	code := m.Run()
	stage.Remove()
	if tmpBase != "" && os.Getenv("KEEP_TEST_FILES") == "" {
		removeTree(tmpBase)
	}
	os.Exit(code)
}

func setup() error {
	_, file, _, _ := runtime.Caller(0)
	repo = filepath.Dir(filepath.Dir(filepath.Dir(file)))
	binary = os.Getenv("SKILLRUN")
	if binary == "" {
		binary = filepath.Join(repo, "bin", "skillrun")
	}
	abs, err := filepath.Abs(binary)
	if err != nil {
		return err
	}
	binary = abs
	if fi, err := os.Stat(binary); err != nil || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("skillrun binary %s not found or not executable (make static, or set SKILLRUN)", binary)
	}
	if tmpBase, err = os.MkdirTemp("", "skillrun-hostile-"); err != nil {
		return err
	}
	if err := os.Chmod(tmpBase, 0o755); err != nil {
		return err
	}
	rootfsTemplate = filepath.Join(tmpBase, "rootfs-template")
	return buildRootfs(rootfsTemplate)
}

func requireSetup(t testing.TB) {
	t.Helper()
	if setupErr != nil {
		t.Fatalf("suite setup failed: %v", setupErr)
	}
}

// buildRootfs makes the suite's busybox rootfs.
func buildRootfs(dir string) error {
	return rootfs.Busybox(dir, map[string]string{"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n"})
}

// cloneRootfs copies the template to dir, hard-linking files.
func cloneRootfs(dir string) error { return rootfs.Clone(rootfsTemplate, dir) }
