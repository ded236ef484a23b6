package main

import "github.com/urfave/cli/v2"

// skillCommand is the `skillrun skill` verb family (validate, inspect,
// list, bundle, run).
func skillCommand(e *env) *cli.Command {
	return &cli.Command{Name: "skill", Usage: "validate, inspect, bundle and run Agent Skills"}
}
