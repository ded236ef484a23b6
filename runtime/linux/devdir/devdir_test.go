//go:build linux

package devdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// newDevDir makes a device folder under a fresh temporary parent, or
// skips when this process cannot (not root; a nodev /tmp).
func newDevDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes device nodes (mknod)")
	}
	base := t.TempDir()
	dir := filepath.Join(base, "skillrun", "dev")
	if err := Ensure(dir); err != nil {
		if strings.Contains(err.Error(), "nodev") {
			t.Skipf("the test's temporary folder is on a nodev filesystem: %v", err)
		}
		t.Fatal(err)
	}
	return dir
}

func TestEnsureDevDir(t *testing.T) {
	dir := newDevDir(t)
	if err := Check(dir); err != nil {
		t.Fatalf("made folder fails its own check: %v", err)
	}
	if err := Ensure(dir); err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "null"), &st); err != nil || unix.Major(st.Rdev) != 1 || unix.Minor(st.Rdev) != 3 {
		t.Fatalf("null is not 1:3: %+v, %v", st, err)
	}
	// Each way of breaking the folder is caught by Check, naming
	// the entry, and repaired by Ensure without leftovers.
	breaks := map[string]func() error{
		"sda":  func() error { return os.WriteFile(filepath.Join(dir, "sda"), nil, 0o644) },
		"null": func() error { return os.Chmod(filepath.Join(dir, "null"), 0o600) },
		"zero": func() error {
			os.Remove(filepath.Join(dir, "zero"))
			return os.WriteFile(filepath.Join(dir, "zero"), nil, 0o666)
		},
		"fd":            func() error { os.Remove(filepath.Join(dir, "fd")); return os.Symlink("/etc", filepath.Join(dir, "fd")) },
		"tty":           func() error { return os.Remove(filepath.Join(dir, "tty")) },
		"urandom":       func() error { return os.Chown(filepath.Join(dir, "urandom"), 1000, 1000) },
		"dev":           func() error { return os.Chmod(dir, 0o777) },
		"not mode 0755": func() error { return os.Chmod(dir, 0o700) },
	}
	for name, brk := range breaks {
		if err := brk(); err != nil {
			t.Fatalf("%s: break: %v", name, err)
		}
		err := Check(dir)
		if err == nil {
			t.Errorf("%s: broken folder passes the check", name)
			continue
		}
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%s: check error %q does not name it", name, err)
		}
		if err := Ensure(dir); err != nil {
			t.Fatalf("%s: repair: %v", name, err)
		}
		left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".dev-*"))
		if len(left) != 0 {
			t.Fatalf("%s: repair left %v", name, left)
		}
	}
	// A parent others may write to is refused by the check (someone else
	// could swap the folder); Ensure, as root, makes skillrun's own
	// parent 0755 again, whatever the umask or a chmod left.
	parent := filepath.Dir(dir)
	for _, mode := range []os.FileMode{0o777, 0o700} {
		if err := os.Chmod(parent, mode); err != nil {
			t.Fatal(err)
		}
		if err := Check(dir); err == nil {
			t.Fatalf("parent mode %v passes the check", mode)
		}
		if err := Ensure(dir); err != nil {
			t.Fatalf("parent mode %v: repair: %v", mode, err)
		}
		if fi, _ := os.Stat(parent); fi.Mode().Perm() != 0o755 {
			t.Fatalf("parent mode %v after repair, want 0755", fi.Mode().Perm())
		}
	}
}

func TestDevDirNodev(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts a tmpfs")
	}
	base := t.TempDir()
	if err := unix.Mount("tmpfs", base, "tmpfs", unix.MS_NODEV, "mode=0755"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	defer unix.Unmount(base, unix.MNT_DETACH)
	err := Ensure(filepath.Join(base, "dev"))
	if err == nil || !strings.Contains(err.Error(), "nodev") {
		t.Fatalf("Ensure on a nodev filesystem = %v, want the nodev refusal", err)
	}
}
