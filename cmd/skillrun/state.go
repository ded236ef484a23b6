package main

import (
	"encoding/json"

	"github.com/urfave/cli/v2"
)

func stateCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:        "state",
		Usage:       "output the state of a container",
		ArgsUsage:   "<container-id>",
		Description: "The state command outputs current state information for the instance of a container.",
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 1, 1); err != nil {
				return err
			}
			rt, err := e.engine(c)
			if err != nil {
				return err
			}
			st, err := rt.State(c.Context, c.Args().First())
			if err != nil {
				return err
			}
			data, err := json.MarshalIndent(st, "", "  ")
			if err != nil {
				return err
			}
			_, err = e.stdout.Write(data)
			return err
		},
	}
}
