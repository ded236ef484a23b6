package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/spec"
)

// sandboxCommand is `skillrun sandbox -- CMD`: a one-off, deny-by-default
// sandbox for any command, without a skill.
func sandboxCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "sandbox",
		Usage:     "run any command in a one-off sandbox: the current folder (or --workspace) at /workspace, no network, no host secrets",
		ArgsUsage: "[flags] -- CMD [ARG...]",
		Description: `Runs CMD in the same hardened sandbox as a skill, without one: the
current folder (or --workspace DIR) read-write at /workspace (the working
directory), the host's /usr read-only, a generated /etc, a private /tmp, no
network unless --network host or --allow-host, no variables of the caller
but those granted with --env, and the limit flags. The host's other files
stay out.

--format raw (default) streams the command's output and exits with its
status (128+N when killed by signal N); --format json prints the result
envelope and exits as "skill run" does.`,
		Flags: append(execFlags("raw"), append(policyFlags(), append(depsFlags(),
			&cli.BoolFlag{Name: "no-prepare", Usage: "never build a missing environment for --with (fail instead)"})...)...),
		Action: func(c *cli.Context) error {
			argv := c.Args().Slice()
			if len(argv) > 0 && argv[0] == "--" {
				argv = argv[1:]
			}
			if len(argv) == 0 {
				return e.usageError("sandbox: no command: skillrun sandbox [flags] -- CMD [ARG...]")
			}
			format, err := e.formatFlag(c, "json", "raw")
			if err != nil {
				return err
			}
			rt, err := e.skillEngine(c)
			if err != nil {
				return err
			}
			prepare(rt)
			opts, err := e.policyOptions(c)
			if err != nil {
				return err
			}
			if opts.Workspace == "" {
				if opts.Workspace, err = os.Getwd(); err != nil {
					return e.usageError("sandbox: the current folder: %v (use --workspace DIR)", err)
				}
			}
			sk := spec.Bare()
			if err := e.withPackages(c, sk); err != nil {
				return err
			}
			if !sk.Deps.Empty() {
				if opts.Deps, err = e.depsManager(c, rt, !c.Bool("no-prepare")); err != nil {
					return err
				}
			}
			return e.execIn(c, rt, sk, opts, argv, format, "sandbox")
		},
	}
}
