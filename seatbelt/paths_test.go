package seatbelt

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestCanonical(t *testing.T) {
	fsys := macFS()
	for _, tc := range []struct {
		in, want string
	}{
		{"/", "/"},
		{"/tmp", "/private/tmp"},
		{"/tmp/x/../y", "/private/tmp/y"},
		{"/var/folders/xy/T", "/private/var/folders/xy/T"},
		{"/etc/hosts", "/private/etc/hosts"},
		{"/private/tmp/", "/private/tmp"},
		{"//Users///alice/./skills", "/Users/alice/skills"},
		{"/Users/alice/current/main.py", "/Users/alice/skills/pdf/main.py"},
		{"/Users/alice/abs/pdf", "/Users/alice/skills/pdf"},
		// ".." after a link is physical: up -> /Users, so up/.. is /.
		{"/Users/alice/up/..", "/"},
		{"/Users/alice/current/..", "/Users/alice/skills"},
		{"/Users/alice/tmplink/a", "/private/tmp/work/a"},
		{"/opt/homebrew/bin/python3", "/opt/homebrew/Cellar/python/3.12/bin/python3"},
		{"/..", "/"},
		{"/Users/nobody/x/../y", "/Users/nobody/y"},
		{"/Users/alice/sp ace/\"q\"/(p)/日本", "/Users/alice/sp ace/\"q\"/(p)/日本"},
	} {
		got, err := Canonical(fsys, tc.in)
		if err != nil {
			t.Errorf("Canonical(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("Canonical(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCanonicalErrors(t *testing.T) {
	fsys := macFS()
	for _, in := range []string{"relative/path", "", "/Users/alice/loop/x", "/a\x00b"} {
		if got, err := Canonical(fsys, in); err == nil {
			t.Errorf("Canonical(%q) = %q, want an error", in, got)
		}
	}
}

func TestCanonicalHostFS(t *testing.T) {
	d := t.TempDir()
	real := filepath.Join(d, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(d, "ln")); err != nil {
		t.Fatal(err)
	}
	// Canonical on the host cannot be checked under t.TempDir here: on
	// Linux it lies under /tmp, which Canonical maps to darwin's
	// /private/tmp. Check the FS methods it relies on instead.
	mode, err := HostFS{}.Lstat(filepath.Join(d, "ln"))
	if err != nil || mode&fs.ModeSymlink == 0 {
		t.Fatalf("Lstat(ln) = %v, %v; want a symbolic link", mode, err)
	}
	if target, err := (HostFS{}).Readlink(filepath.Join(d, "ln")); err != nil || target != "real" {
		t.Fatalf("Readlink(ln) = %q, %v", target, err)
	}
	if _, err := (HostFS{}).Lstat(filepath.Join(d, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Lstat(missing) = %v, want fs.ErrNotExist", err)
	}
	if mode, err := (HostFS{}).Lstat(real); err != nil || !mode.IsDir() {
		t.Fatalf("Lstat(real) = %v, %v", mode, err)
	}
}

func TestAncestors(t *testing.T) {
	if got := ancestors("/"); got != nil {
		t.Errorf("ancestors(/) = %q", got)
	}
	want := []string{"/", "/a", "/a/b"}
	if got := ancestors("/a/b/c"); !reflect.DeepEqual(got, want) {
		t.Errorf("ancestors(/a/b/c) = %q, want %q", got, want)
	}
	if !within("/a/b", "/a") || within("/ab", "/a") || !within("/a", "/a") || !within("/x", "/") {
		t.Error("within is wrong")
	}
}
