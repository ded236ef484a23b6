package main

import (
	"encoding/json"

	"github.com/urfave/cli/v2"
)

func featuresCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "features",
		Usage: "show the enabled features",
		Description: joinLines(
			`Show the enabled features as runtime-spec features JSON. It tells what this`,
			`build supports (seccomp only when libseccomp is linked in) and, in the`,
			`"run.skillrun.cgroups" annotation, whether resource limits are enforced`,
			`for the calling user.`),
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 0, 0); err != nil {
				return err
			}
			rt, err := e.engine(c)
			if err != nil {
				return err
			}
			f, err := rt.Features()
			if err != nil {
				return err
			}
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "    ")
			return enc.Encode(f)
		},
	}
}
