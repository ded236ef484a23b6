package main

import (
	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/runtime"
)

func startCommand(e *env) *cli.Command {
	return idVerb(e, "start", "executes the user defined process in a created container",
		"The start command executes the user defined process in a created container.",
		runtime.Runtime.Start)
}
