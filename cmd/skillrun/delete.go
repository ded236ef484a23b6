package main

import "github.com/urfave/cli/v2"

func deleteCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete any resources held by the container often used with detached container",
		ArgsUsage: "<container-id>",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "Forcibly deletes the container if it is still running (uses SIGKILL)"},
		},
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 1, 1); err != nil {
				return err
			}
			rt, err := e.engine(c)
			if err != nil {
				return err
			}
			return rt.Delete(c.Context, c.Args().First(), c.Bool("force"))
		},
	}
}
