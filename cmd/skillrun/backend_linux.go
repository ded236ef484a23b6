//go:build linux

package main

import (
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/linux"
)

const platform = "linux"

func newBackend(opts runtime.Options) (runtime.Runtime, error) {
	return linux.New(opts)
}

// closeBackend ends what a back end keeps for this process: the
// sandboxes' lifetime guard, reaped here rather than left an orphan.
func closeBackend(rt runtime.Runtime) {
	if l, ok := rt.(*linux.Runtime); ok {
		l.CloseGuard(100 * time.Millisecond)
	}
}

func exampleSpec(rootless bool) (*specs.Spec, error) {
	return linux.ExampleSpec(rootless), nil
}

// hostDevices is the host's prepared device folder for bundles written
// without a back end (nil: none).
func hostDevices() runtime.DevDirProvider { return linux.HostDevices{} }
