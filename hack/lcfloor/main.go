//go:build linux

// Command lcfloor is the least a libcontainer caller can do to run an OCI
// bundle: read config.json, convert it (specconv), Create, Run, Wait,
// Destroy. No locking, no hooks, no state checks, no I/O relay (the
// container inherits stdio), no exit report. `make bench` times it on the
// same bundles as skillrun and runc, so the part of skillrun's time that is
// libcontainer's own is measured, not guessed. A benchmark tool only: it
// is not installed and nothing else uses it.
//
// Usage: lcfloor STATE-ROOT BUNDLE ID
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	_ "github.com/opencontainers/cgroups/devices" // registers the device-rule manager
	"github.com/opencontainers/runc/libcontainer"
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
	"github.com/opencontainers/runc/libcontainer/specconv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func init() {
	// libcontainer re-executes this binary as `lcfloor init`.
	if len(os.Args) > 1 && os.Args[1] == "init" {
		libcontainer.Init()
	}
}

func main() {
	code, err := run(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "lcfloor:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func run(args []string) (int, error) {
	if len(args) != 3 {
		return 0, errors.New("usage: lcfloor STATE-ROOT BUNDLE ID")
	}
	root, bundle, id := args[0], args[1], args[2]
	bundle, err := filepath.Abs(bundle)
	if err != nil {
		return 0, err
	}
	data, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return 0, err
	}
	var spec specs.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return 0, fmt.Errorf("config.json: %w", err)
	}
	if !filepath.IsAbs(spec.Root.Path) {
		spec.Root.Path = filepath.Join(bundle, spec.Root.Path)
	}
	config, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{
		CgroupName: id,
		Spec:       &spec,
	})
	if err != nil {
		return 0, err
	}
	c, err := libcontainer.Create(root, id, config)
	if err != nil {
		return 0, err
	}
	defer c.Destroy() //nolint:errcheck // best effort; a benchmark tool
	p := &libcontainer.Process{
		Args:   spec.Process.Args,
		Env:    spec.Process.Env,
		Cwd:    spec.Process.Cwd,
		UID:    int(spec.Process.User.UID),
		GID:    int(spec.Process.User.GID),
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Init:   true,
	}
	if err := c.Run(p); err != nil {
		return 0, err
	}
	ps, err := p.Wait()
	if ps == nil {
		return 0, err
	}
	ws := ps.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ws.ExitStatus(), nil
}
