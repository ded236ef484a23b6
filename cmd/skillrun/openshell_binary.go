package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// The OpenShell compute driver is a second binary, skillrun-openshell
// (this program built with the openshell tag), installed beside skillrun.

const (
	openshellCommandName = "openshell-driver"
	openshellUsage       = "serve OpenShell's compute driver gRPC API on a Unix socket"
	// openshellBinary is the driver's binary.
	openshellBinary = "skillrun-openshell"
)

// findOpenShellBinary is the driver's binary: beside exe (this program's
// own path), else in PATH.
func findOpenShellBinary(exe string) (string, error) {
	if exe != "" {
		p := filepath.Join(filepath.Dir(exe), openshellBinary)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(openshellBinary); err == nil {
		return p, nil
	} else if !errors.Is(err, exec.ErrNotFound) {
		return "", fmt.Errorf("%s: %w", openshellBinary, err)
	}
	where := "in PATH"
	if exe != "" {
		where = "beside " + exe + " or in PATH"
	}
	return "", fmt.Errorf("%s: the OpenShell driver is the separate binary %s, and none was found %s: install it beside skillrun (the release tarball and make both provide bin/%s)",
		openshellCommandName, openshellBinary, where, openshellBinary)
}
