//go:build !runtimeonly

package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/skillenv"
	"github.com/skillrun/skillrun/spec"
)

// execFlags are the flags of skill exec and sandbox on top of the grants.
func execFlags(defaultFormat string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "cwd", Usage: "working directory, inside /workspace or /skill (default: /workspace when there is one, else /skill)"},
		&cli.StringFlag{Name: "format", Value: defaultFormat, Usage: "json (the result envelope) or raw (the command's output as it comes; exit with its status)"},
	}
}

func skillExecCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "run any command in a skill's sandbox: one of its scripts with arguments, or a tool on the workspace",
		ArgsUsage: "DIR -- CMD [ARG...]",
		Description: `Runs CMD in the sandbox of the skill in DIR: the same hardened profile,
limits, grants and network allowlist as "skill run", with the skill
read-only at /skill, --workspace read-write at /workspace, and the skill's
dependency environment first on PATH (python3, python and node run with
its packages). The working directory is /workspace when there is one, else
/skill. A relative script of python3/node/sh that is not in the working
directory but is in the skill's folder runs from /skill (the result says
so). stdin is passed through.

--format json (default) prints the result envelope (with "command") and
exits as "skill run" does; --format raw streams the command's output and
exits with its status (128+N when killed by signal N).`,
		Flags: append(execFlags("json"), append(policyFlags(), append(depsFlags(),
			&cli.BoolFlag{Name: "no-prepare", Usage: "never build a missing dependency environment (fail instead)"})...)...),
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			if len(args) > 1 && args[1] == "--" {
				args = append(args[:1:1], args[2:]...)
			}
			if len(args) < 2 {
				return e.usageError("skill exec: requires the skill folder and a command: skill exec [flags] DIR -- CMD [ARG...]")
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
			sk, err := e.loadSkillDir(c, args[0])
			if err != nil {
				return err
			}
			opts, err := e.policyOptions(c)
			if err != nil {
				return err
			}
			if !sk.Deps.Empty() {
				if opts.Deps, err = e.depsManager(c, rt, !c.Bool("no-prepare")); err != nil {
					return err
				}
			}
			return e.execIn(c, rt, sk, opts, args[1:], format, "skill exec")
		},
	}
}

// execIn runs the command argv in sk's sandbox (spec.Bare's for sandbox)
// and renders the result as format asks.
func (e *env) execIn(c *cli.Context, rt runtime.Runtime, sk *spec.Skill, opts runner.Options, argv []string, format, verb string) error {
	x := &runner.Exec{Exec: spec.Exec{Args: argv, Cwd: c.String("cwd")}}
	if !isTerminal(e.stdin) {
		x.Stdin = e.stdin
	}
	if format == "raw" {
		x.Stdout, x.Stderr = e.stdout, e.stderr
	}
	opts.Exec = x
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	res, err := runner.Run(ctx, rt, sk, nil, opts)
	if err != nil {
		if runner.IsInputError(err) {
			return e.failCode(runner.ExitBadInput, fmt.Errorf("%s %q: %w", verb, sk.Name, err))
		}
		if errors.Is(err, skillenv.ErrNotPrepared) {
			return e.failCode(runner.ExitBadInput, verbError(verb, sk.Name, err))
		}
		return verbError(verb, sk.Name, err)
	}
	if format == "raw" {
		for _, n := range res.Notes {
			e.log.Info(n)
		}
		if res.StoppedReason != "" || res.Error != "" && res.MissingModule != "" {
			fmt.Fprintf(e.stderr, "skillrun: %s: %s\n", verb, res.Error)
		}
		if res.ExitCode >= 0 {
			return exitStatus(res.ExitCode)
		}
		return exitStatus(res.ProcessExitCode())
	}
	if err := writeResult(e.stdout, res, "json"); err != nil {
		return err
	}
	if code := res.ProcessExitCode(); code != 0 {
		return exitStatus(code)
	}
	return nil
}

// oneLine joins a multi-line error (Load's joined problems) with "; ".
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}
