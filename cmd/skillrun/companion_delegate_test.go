//go:build !openshell

package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/fake"
)

// execCall is what a delegated command asked execve for.
type execCall struct {
	path string
	argv []string
}

// callRecording runs the app in-process like call, recording the exec of
// a companion binary (which returns errExecRecorded: exit 126).
func callRecording(t *testing.T, args ...string) (result, []execCall) {
	t.Helper()
	var out, errb bytes.Buffer
	var calls []execCall
	f := fake.New()
	e := &env{
		stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		backend: func(runtime.Options) (runtime.Runtime, error) { return f, nil },
		execve: func(path string, argv, _ []string) error {
			calls = append(calls, execCall{path, argv})
			return errExecRecorded
		},
	}
	code := e.run(append([]string{"skillrun"}, args...))
	return result{code, out.String(), errb.String()}, calls
}

var errExecRecorded = errors.New("exec recorded")

// companionInPath puts an executable named binary in a new folder that is
// all of PATH, and returns its path.
func companionInPath(t *testing.T, binary string) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	p := filepath.Join(dir, binary)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDelegateOpenShell: skillrun openshell-driver execs skillrun-openshell
// with the whole command line, global flags included; without it, one line
// that names it and exit 1.
func TestDelegateOpenShell(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	r, calls := callRecording(t, "--root", "/r", "openshell-driver", "--bind-address", "x")
	if r.code != 1 || len(calls) != 0 || !strings.Contains(r.stderr, "skillrun-openshell") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("none installed: %+v, %v", r, calls)
	}
	bin := companionInPath(t, openshellBinary)
	r, calls = callRecording(t, "--root", "/r", "openshell-driver", "--bind-address", "x")
	want := []execCall{{bin, []string{"skillrun", "--root", "/r", "openshell-driver", "--bind-address", "x"}}}
	if !reflect.DeepEqual(calls, want) || r.code != 126 || !strings.Contains(r.stderr, errExecRecorded.Error()) {
		t.Errorf("exec: %+v, %v; want %v", r, calls, want)
	}
}
