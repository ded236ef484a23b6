//go:build !openshell

package main

import "github.com/urfave/cli/v2"

// openshellCommand is the driver's command in skillrun: it execs the
// driver's own binary with this command line, global flags included, so
// that `skillrun openshell-driver ...` works while neither skillrun nor
// skillrun-skills links gRPC or the image stack.
func openshellCommand(e *env) *cli.Command {
	return delegateCommand(e, openshellCommandName, openshellUsage, "", openshellBinary, "the OpenShell driver")
}
