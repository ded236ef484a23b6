//go:build !openshell

package main

import (
	"os"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// openshellCommand is the driver's command in skillrun: it execs the
// driver's own binary (openshell_binary.go) with this command line,
// global flags included, so that `skillrun openshell-driver ...` works as
// before while skillrun itself links neither gRPC nor the image stack.
func openshellCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  openshellCommandName,
		Usage: openshellUsage,
		Description: joinLines(
			`Runs OpenShell sandboxes as skillrun containers. The driver is the`,
			`binary `+openshellBinary+`, installed beside skillrun; this command runs it`,
			`with the same arguments (see `+openshellBinary+` `+openshellCommandName+` --help).`),
		SkipFlagParsing: true,
		HideHelp:        true,
		Action: func(c *cli.Context) error {
			exe, _ := os.Executable()
			bin, err := findOpenShellBinary(exe)
			if err != nil {
				if a := c.Args().First(); a == "--help" || a == "-h" {
					// The driver's own help lists its flags; without
					// it, this one says where it is.
					return cli.ShowSubcommandHelp(c)
				}
				return err
			}
			argv := append([]string{bin}, e.argv[1:]...)
			if err := unix.Exec(bin, argv, os.Environ()); err != nil {
				return &exitError{code: 126, err: err}
			}
			return nil
		},
	}
}
