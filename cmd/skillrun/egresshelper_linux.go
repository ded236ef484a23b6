//go:build linux && !runtimeonly

package main

import (
	"fmt"
	"os"

	"github.com/skillrun/skillrun/egress"
	"github.com/skillrun/skillrun/egress/handoff"
	"github.com/skillrun/skillrun/runtime/linux"
)

// The detached egress server of a bundle that asks for a network allowlist
// (`BINARY handoff.HelperArg ...`) is an internal entry point of the
// binaries that link the egress server: skillrun-skills (which skillrun,
// the OCI runtime, starts for it) and skillrun-openshell.
func init() {
	if len(os.Args) >= 2 && os.Args[1] == handoff.HelperArg {
		if err := linux.EgressHelperMain(os.Args[2:], egress.HelperMain); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}
