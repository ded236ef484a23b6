//go:build linux

package main

import (
	"os"

	"github.com/skillrun/skillrun/runtime/linux"
)

// libcontainer re-executes this binary as `skillrun init` to become the
// container's init; that must happen before anything else runs.
func init() {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		linux.Init()
	}
}
