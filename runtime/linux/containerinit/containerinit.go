//go:build linux

// Package containerinit turns the process into a container's init when
// libcontainer has re-executed the binary as `BINARY init`. Importing it
// (for its side effect) is all a binary that runs containers through
// runtime/linux has to do.
//
// It is a package of its own, importing libcontainer and nothing of
// skillrun's but egress/nsinit (a few functions, nothing libcontainer
// does not import already), so that its init function runs as early as Go's package
// initialisation order allows: before the packages only the command line
// needs (urfave/cli, YAML, JSON Schema, the skill model) are initialised.
// The container's init never returns to them, so it does not pay for
// them: its start-up is measurably shorter (docs/performance.md).
package containerinit

import (
	"fmt"
	"os"

	"github.com/opencontainers/runc/libcontainer"
	// The device cgroup manager (devices controller, eBPF on v2).
	_ "github.com/opencontainers/cgroups/devices"
	// nsenter's C constructor runs before the Go runtime in `BINARY init`
	// and sets up namespaces (nsexec); it returns at once otherwise.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"

	"github.com/skillrun/skillrun/egress/nsinit"
)

func init() {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		// A sandbox with a network allowlist: its sockets are bound
		// here, in its namespaces, and handed to the egress server
		// before anything else runs (no hook process to start).
		if err := nsinit.FromInit(); err != nil {
			fmt.Fprintln(os.Stderr, "skillrun init:", err)
			os.Exit(1)
		}
		// Never returns: it execs the container's process or exits.
		libcontainer.Init()
	}
}
