package main

import "github.com/urfave/cli/v2"

func pauseCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:        "pause",
		Usage:       "pause suspends all processes inside the container",
		ArgsUsage:   "<container-id>",
		Description: "The pause command suspends all processes in the instance of the container (cgroup freezer).",
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 1, 1); err != nil {
				return err
			}
			rt, err := e.engine(c)
			if err != nil {
				return err
			}
			return rt.Pause(c.Context, c.Args().First())
		},
	}
}

func resumeCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:        "resume",
		Usage:       "resumes all processes that have been previously paused",
		ArgsUsage:   "<container-id>",
		Description: "The resume command resumes all processes in the instance of the container.",
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 1, 1); err != nil {
				return err
			}
			rt, err := e.engine(c)
			if err != nil {
				return err
			}
			return rt.Resume(c.Context, c.Args().First())
		},
	}
}
