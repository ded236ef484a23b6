//go:build linux

package main

import (
	"fmt"
	"os"

	"github.com/skillrun/skillrun/runtime/linux"
)

// The prestart hook shim (linux.HookStateArg) is an internal entry point of
// this binary: it execs the real hook and returns only on failure. (The
// other one, `skillrun init`, libcontainer's re-execution as the
// container's init, is runtime/linux/containerinit's: it runs before this
// package and the packages only the command line needs are initialised.)
func init() {
	if len(os.Args) >= 2 && os.Args[1] == linux.HookStateArg {
		err := linux.HookShim(os.Args[2:], os.Stdin)
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
