package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindCompanion(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	exe := filepath.Join(dir, "skillrun")
	t.Setenv("PATH", other)
	// None beside exe nor in PATH: an error naming the binary and where
	// it was looked for.
	_, err := findCompanion(exe, openshellBinary, "the OpenShell driver")
	if err == nil || !strings.Contains(err.Error(), "skillrun-openshell") || !strings.Contains(err.Error(), "beside "+exe) {
		t.Fatalf("none installed: err = %v", err)
	}
	// In PATH only.
	inPath := filepath.Join(other, openshellBinary)
	if err := os.WriteFile(inPath, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findCompanion(exe, openshellBinary, "the OpenShell driver"); err != nil || got != inPath {
		t.Errorf("in PATH: %q, %v; want %q", got, err, inPath)
	}
	// Beside exe but not executable: PATH's.
	beside := filepath.Join(dir, openshellBinary)
	if err := os.WriteFile(beside, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := findCompanion(exe, openshellBinary, "the OpenShell driver"); got != inPath {
		t.Errorf("a non-executable file beside skillrun was taken: %q", got)
	}
	// Beside exe: first.
	if err := os.Chmod(beside, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findCompanion(exe, openshellBinary, "the OpenShell driver"); err != nil || got != beside {
		t.Errorf("beside skillrun: %q, %v; want %q", got, err, beside)
	}
}
