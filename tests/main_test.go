//go:build integration

// Package tests is the black-box test suite of the runtime CLI. It runs the
// binary named by $RUNTIME (default <repo>/bin/skillrun) and checks its wire
// contract and, from the host side, what it really did. The same suite must
// pass against runc (RUNTIME=runc).
package tests

import (
	"fmt"
	"github.com/skillrun/skillrun/tests/internal/hostcheck"
	"github.com/skillrun/skillrun/tests/internal/rootfs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// runtimeInfo is what the suite expects of a given runtime where runtimes
// legitimately differ.
type runtimeInfo struct {
	// defaultRoot is the state root used as root without --root.
	defaultRoot string
	// xdgSubdir is the directory under $XDG_RUNTIME_DIR used rootless
	// without --root.
	xdgSubdir string
	// skillrun marks the runtime under development; checks of its own
	// extensions run only for it.
	skillrun bool
}

// runtimes is keyed by the base name of the runtime binary.
var runtimes = map[string]runtimeInfo{
	"skillrun": {defaultRoot: "/run/skillrun", xdgSubdir: "skillrun", skillrun: true},
	"runc":     {defaultRoot: "/run/runc", xdgSubdir: "runc"},
	"crun":     {defaultRoot: "/run/crun", xdgSubdir: "crun"},
}

var (
	// runtimeBin is the absolute path of the runtime under test.
	runtimeBin string
	// runtimeName is the base name of runtimeBin, the key into runtimes.
	runtimeName string
	// tmpBase holds every test's files; mode 0755 so the rootless test user
	// can traverse it.
	tmpBase string
	// rootfsTemplate is a busybox rootfs every bundle's rootfs is cloned from.
	rootfsTemplate string
	// setupErr is why the suite cannot run at all; every test reports it.
	setupErr error
	// stage holds copies of what the rootless test user cannot reach
	// (the runtime binary in a checkout under a folder closed to it).
	stage hostcheck.Stage
)

func TestMain(m *testing.M) {
	setupErr = setup()
	// Like containerd's shim, be the subreaper of the containers we start so
	// that an exited init can be reaped and its disappearance observed
	// (pid 1 on this host does not reap orphans).
	if setupErr == nil {
		setupErr = hostcheck.Subreap(runtimeBin)
	}
	code := m.Run()
	stage.Remove()
	if tmpBase != "" && os.Getenv("KEEP_TEST_FILES") == "" {
		removeTree(tmpBase)
	}
	os.Exit(code)
}

func setup() error {
	name := os.Getenv("RUNTIME")
	if name == "" {
		_, file, _, _ := runtime.Caller(0)
		name = filepath.Join(filepath.Dir(filepath.Dir(file)), "bin", "skillrun")
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return fmt.Errorf("runtime under test %q (set RUNTIME): %w", name, err)
	}
	if p, err = filepath.Abs(p); err != nil {
		return err
	}
	runtimeBin = p
	runtimeName = filepath.Base(p)
	if _, ok := runtimes[runtimeName]; !ok {
		return fmt.Errorf("runtime %q is not in the suite's runtime table (tests/main_test.go); add it", runtimeName)
	}
	tmpBase, err = os.MkdirTemp("", "skillrun-tests-")
	if err != nil {
		return err
	}
	if err := os.Chmod(tmpBase, 0o755); err != nil {
		return err
	}
	rootfsTemplate = filepath.Join(tmpBase, "rootfs-template")
	return buildRootfs(rootfsTemplate)
}

// buildRootfs makes the suite's busybox rootfs, with root, an
// unprivileged user and nobody in /etc.
func buildRootfs(dir string) error {
	return rootfs.Busybox(dir, map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
		"etc/group":  "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n",
	})
}

// cloneRootfs copies the template to dir, hard-linking busybox.
func cloneRootfs(dir string) error { return rootfs.Clone(rootfsTemplate, dir) }
