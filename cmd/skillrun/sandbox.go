//go:build !runtimeonly

package main

import (
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/spec"
)

// sandboxCommand is `skillrun sandbox -- CMD`: a one-off, deny-by-default
// sandbox for any command, without a skill.
func sandboxCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "sandbox",
		Usage:     sandboxUsage,
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
		Flags: forSandbox(append(execFlags("raw"), append(policyFlags(), append(depsFlags(),
			&cli.BoolFlag{Name: "no-prepare", Usage: "never build a missing environment for --with (fail instead)"})...)...)),
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

// sandboxFlagUsage is what sandbox says of the flags it shares with the skill
// verbs where their words do not apply: it has no skill (no /skill, no
// sandbox.yaml).
var sandboxFlagUsage = map[string]string{
	"cwd":          "working directory, /workspace or a folder inside it (default: /workspace)",
	"network":      "network grant: none or allow (loopback only, plus the --allow-host hosts: no skill declares any) or host (FULL host network, unfiltered)",
	"allow-host":   "grant HOST:PORT or *.DOMAIN:PORT through the allowlist (repeatable; nothing else is reachable)",
	"output-limit": "cap on stdout and stderr each; the command is killed past it",
	"workspace":    "host folder bound writable at /workspace (default: the current folder)",
	"with":         "add a package to the sandbox's environment: a pip requirement (name==1.2) or npm:NAME@VERSION (repeatable; part of the environment's key)",
}

// forSandbox rewords flags shared with the skill verbs for sandbox (see
// sandboxFlagUsage); the defaults are the built-in ones, with no manifest to
// come first.
func forSandbox(flags []cli.Flag) []cli.Flag {
	for _, f := range flags {
		var usage, def *string
		switch f := f.(type) {
		case *cli.StringFlag:
			usage, def = &f.Usage, &f.DefaultText
		case *cli.StringSliceFlag:
			usage, def = &f.Usage, &f.DefaultText
		case *cli.Float64Flag:
			usage, def = &f.Usage, &f.DefaultText
		case *cli.Int64Flag:
			usage, def = &f.Usage, &f.DefaultText
		case *cli.DurationFlag:
			usage, def = &f.Usage, &f.DefaultText
		default:
			continue
		}
		if u, ok := sandboxFlagUsage[f.Names()[0]]; ok {
			*usage = u
		}
		*def = strings.TrimPrefix(*def, "manifest, else ")
	}
	return flags
}
