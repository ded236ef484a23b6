package safefs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "state.json")
	for i, content := range []string{"first", "second, longer", "third, durable"} {
		write := WriteFileAtomic
		if i == 2 {
			write = WriteFileDurable
		}
		if err := write(name, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil || string(got) != content {
			t.Fatalf("read back %q, %v; want %q", got, err, content)
		}
		if fi, _ := os.Stat(name); fi.Mode().Perm() != 0o640 {
			t.Fatalf("mode %v, want 0640", fi.Mode().Perm())
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
	// A failed write leaves neither the file nor a temporary one.
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "x"), []byte("x"), 0o600); err == nil {
		t.Fatal("write into a missing folder succeeded")
	}
	if err := WriteFileAtomic(filepath.Join(dir, "sub"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "sub"), []byte("x"), 0o600); err == nil {
		t.Fatal("rename over a folder succeeded")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("after a failed rename: %v, want state.json and sub only", ents)
	}
}

// TestCopyBeneath copies a regular file and refuses what would lead
// outside the folder: a symlinked file, a path through a symlinked
// folder, "..", a folder, and an existing destination (the canary's
// content never reaches a copy).
func TestCopyBeneath(t *testing.T) {
	root, out, host := t.TempDir(), t.TempDir(), t.TempDir()
	canary := filepath.Join(host, "secret")
	if err := os.WriteFile(canary, []byte("CANARY"), 0o600); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(root, "sub", "f"), []byte("data"), 0o644))
	must(os.Symlink(canary, filepath.Join(root, "link")))
	must(os.Symlink(host, filepath.Join(root, "dirlink")))

	dst := filepath.Join(out, "f")
	must(CopyBeneath(root, "sub/f", dst, 0o640))
	if b, err := os.ReadFile(dst); err != nil || string(b) != "data" {
		t.Fatalf("copy: %q %v", b, err)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o640&^currentUmask() {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	if err := CopyBeneath(root, "sub/f", dst, 0o644); err == nil {
		t.Error("an existing destination was overwritten")
	}
	for i, rel := range []string{"link", "dirlink/secret", "../" + filepath.Base(host) + "/secret", "sub"} {
		d := filepath.Join(out, fmt.Sprint("bad", i))
		if err := CopyBeneath(root, rel, d, 0o644); err == nil {
			t.Errorf("%s: copied", rel)
		}
		if b, err := os.ReadFile(d); err == nil && strings.Contains(string(b), "CANARY") {
			t.Errorf("%s: the canary was copied", rel)
		}
	}
}

// currentUmask reads the process's umask (set back at once).
func currentUmask() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}

// TestWriteBeneath: a write stays inside the folder whatever the tree
// holds: symlinks planted on the way or at the name are not followed, and
// ".." or absolute names are refused.
func TestWriteBeneath(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := WriteBeneath(root, "a/b/c.txt", []byte("x"), 0o640, [2]int{-1, -1}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(root, "a/b/c.txt")); err != nil || string(got) != "x" {
		t.Fatalf("read back %q, %v", got, err)
	}
	os.Symlink(outside, filepath.Join(root, "link"))
	os.Symlink(filepath.Join(outside, "target"), filepath.Join(root, "file-link"))
	for _, rel := range []string{"link/x", "../x", "/etc/x", "a/../../x", ""} {
		if err := WriteBeneath(root, rel, []byte("y"), 0o644, [2]int{-1, -1}); err == nil {
			t.Errorf("write to %q succeeded", rel)
		}
	}
	// A symlink at the name itself is replaced, its target untouched.
	if err := WriteBeneath(root, "file-link", []byte("z"), 0o644, [2]int{-1, -1}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(root, "file-link")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("file-link is not a regular file now: %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("something was written outside: %v", ents)
	}
}
