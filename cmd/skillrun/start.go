package main

import "github.com/urfave/cli/v2"

func startCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:        "start",
		Usage:       "executes the user defined process in a created container",
		ArgsUsage:   "<container-id>",
		Description: "The start command executes the user defined process in a created container.",
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 1, 1); err != nil {
				return err
			}
			rt, err := e.engine(c)
			if err != nil {
				return err
			}
			return rt.Start(c.Context, c.Args().First())
		},
	}
}
