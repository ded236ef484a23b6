//go:build linux

package main

import (
	"fmt"
	"os"

	"github.com/skillrun/skillrun/runtime/linux"
)

// libcontainer re-executes this binary as `skillrun init` to become the
// container's init; that must happen before anything else runs. The
// prestart hook shim (linux.HookStateArg) is the same kind of internal
// entry point: it execs the real hook and returns only on failure.
func init() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case "init":
		linux.Init()
	case linux.HookStateArg:
		err := linux.HookShim(os.Args[2:], os.Stdin)
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
