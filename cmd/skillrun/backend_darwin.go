//go:build darwin

package main

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/darwin"
)

const platform = "darwin"

func newBackend(opts runtime.Options) (runtime.Runtime, error) {
	return darwin.New(opts)
}

// closeBackend ends what a back end keeps for this process (nothing).
func closeBackend(runtime.Runtime) {}

func exampleSpec(rootless bool) (*specs.Spec, error) {
	return nil, runtime.NotSupportedError("spec", platform)
}

// hostDevices is the host's prepared device folder for bundles written
// without a back end (nil: none).
func hostDevices() runtime.DevDirProvider { return nil }
