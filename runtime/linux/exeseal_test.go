//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillrun/skillrun/runtime"
)

// TestExeSealWarning: a state root inside the binary's folder (where
// libcontainer's overlay cannot protect the binary and it copies it for
// every container) is warned about once, and the features document says
// how the binary is sealed; a state root elsewhere is silent.
func TestExeSealWarning(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root (rootless always copies the binary: nothing to warn about)")
	}
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	below, err := os.MkdirTemp(filepath.Dir(exe), "state-")
	if err != nil {
		t.Skipf("skipped: cannot make a folder beside the test binary: %v", err)
	}
	defer os.RemoveAll(below)
	r, err := New(runtime.Options{Root: below})
	if err != nil {
		t.Fatal(err)
	}
	if w := exeSealWarning(r.root); !strings.Contains(w, "is inside the binary's folder") || !strings.Contains(w, "sealed memfd") {
		t.Errorf("state root below the binary: warning %q", w)
	}
	f, _ := r.Features()
	if v := f.Annotations[AnnotationExeSeal]; !strings.HasPrefix(v, "memfd: the state root") {
		t.Errorf("features %s = %q", AnnotationExeSeal, v)
	}
	r, err = New(runtime.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if w := exeSealWarning(r.root); w != "" && !strings.HasPrefix(filepath.Dir(exe), os.TempDir()) {
		t.Errorf("state root elsewhere: warning %q", w)
	}
	if f, _ := r.Features(); f.Annotations[AnnotationExeSeal] != "overlay" && !strings.HasPrefix(filepath.Dir(exe), os.TempDir()) {
		t.Errorf("features %s = %q", AnnotationExeSeal, f.Annotations[AnnotationExeSeal])
	}
}
