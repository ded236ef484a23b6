//go:build darwin

package main

import (
	"fmt"
	"os"

	"github.com/skillrun/skillrun/runtime/darwin"
)

// create re-executes this binary as `skillrun init`; the init execs
// sandbox-exec and only returns on failure.
func init() {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		fmt.Fprintln(os.Stderr, darwin.Init())
		os.Exit(1)
	}
}
