package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/runtime"
)

// idVerb is a verb whose only argument is a container ID and whose whole
// work is one engine call (start, pause, resume).
func idVerb(e *env, name, usage, description string, call func(runtime.Runtime, context.Context, string) error) *cli.Command {
	return &cli.Command{
		Name:        name,
		Usage:       usage,
		ArgsUsage:   "<container-id>",
		Description: description,
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 1, 1); err != nil {
				return err
			}
			rt, err := e.engine(c)
			if err != nil {
				return err
			}
			return call(rt, c.Context, c.Args().First())
		},
	}
}

func pauseCommand(e *env) *cli.Command {
	return idVerb(e, "pause", "pause suspends all processes inside the container",
		"The pause command suspends all processes in the instance of the container (cgroup freezer).",
		runtime.Runtime.Pause)
}

func resumeCommand(e *env) *cli.Command {
	return idVerb(e, "resume", "resumes all processes that have been previously paused",
		"The resume command resumes all processes in the instance of the container.",
		runtime.Runtime.Resume)
}
