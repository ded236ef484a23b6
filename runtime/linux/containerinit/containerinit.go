//go:build linux

// Package containerinit turns the process into a container's init when
// libcontainer has re-executed the binary as `BINARY init`. Importing it
// (for its side effect) is all a binary that runs containers through
// runtime/linux has to do.
//
// It is a package of its own, importing libcontainer and nothing of
// skillrun's, so that its init function runs as early as Go's package
// initialisation order allows: before the packages only the command line
// needs (urfave/cli, YAML, JSON Schema, the skill model) are initialised.
// The container's init never returns to them, so it does not pay for
// them: its start-up is measurably shorter (docs/benchmarks.md).
package containerinit

import (
	"os"

	"github.com/opencontainers/runc/libcontainer"
	// The device cgroup manager (devices controller, eBPF on v2).
	_ "github.com/opencontainers/cgroups/devices"
	// nsenter's C constructor runs before the Go runtime in `BINARY init`
	// and sets up namespaces (nsexec); it returns at once otherwise.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
)

func init() {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		// Never returns: it execs the container's process or exits.
		libcontainer.Init()
	}
}
