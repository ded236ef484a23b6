//go:build !runtimeonly

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/mcpserver"
	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/spec"
)

func skillValidateCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check a skill folder: SKILL.md, sandbox.yaml, entry point, input schema",
		ArgsUsage: "DIR...",
		Description: `Prints "DIR: ok (...)" for each valid skill and every problem of an
invalid one on stderr, one line each, naming its file and field. Deviations
from the Agent Skills specification that do not touch the sandbox (a
description over 1024 characters, a name other than the folder's) are
warnings ("DIR: warning: ..."); --strict makes them errors. Exit 2 when a
skill is invalid.`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "strict", Usage: "treat warnings (deviations from the Agent Skills specification) as errors"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return e.usageError("skill validate: requires at least 1 argument, the skill folder")
			}
			bad := 0
			for _, dir := range c.Args().Slice() {
				sk, err := spec.Load(dir)
				if err != nil {
					bad++
					for _, line := range strings.Split(err.Error(), "\n") {
						fmt.Fprintf(e.stderr, "%s: %s\n", dir, line)
					}
					continue
				}
				level := "warning"
				if c.Bool("strict") {
					level = "error"
				}
				for _, w := range sk.Warnings {
					fmt.Fprintf(e.stderr, "%s: %s: %s\n", dir, level, w)
				}
				if c.Bool("strict") && len(sk.Warnings) > 0 {
					bad++
					continue
				}
				entry := "entry " + sk.Entry.Path
				if !sk.HasEntry() {
					entry = "no entry point: use its scripts with skill exec"
				}
				fmt.Fprintf(e.stdout, "%s: ok (%s, %s, input %s)\n", dir, sk.Name, entry, sk.Input.Source)
			}
			if bad > 0 {
				return exitStatus(runner.ExitBadInput)
			}
			return nil
		},
	}
}

// inspection is `skill inspect --format json`.
type inspection struct {
	*spec.Skill
	// Policy is the effective policy with no operator overrides.
	Policy *spec.Policy `json:"policy,omitempty"`
	// PolicyRefusal is set when the skill cannot run without grants.
	PolicyRefusal string `json:"policy_refusal,omitempty"`
}

func skillInspectCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "print a skill's metadata, or its tool definition for an LLM API",
		ArgsUsage: "DIR",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Value: "json", Usage: "json (everything skillrun knows), openai (Chat Completions tool), anthropic (Messages API tool) or mcp (MCP tools/list entry)"},
		},
		Action: func(c *cli.Context) error {
			format, err := e.formatFlag(c, "json", "openai", "anthropic", "mcp")
			if err != nil {
				return err
			}
			sk, err := e.loadSkill(c)
			if err != nil {
				return err
			}
			v, err := toolDefinition(sk, format)
			if err != nil {
				return err
			}
			return writeJSON(e.stdout, v)
		},
	}
}

// toolDefinition renders a skill in one vendor's tool shape.
func toolDefinition(sk *spec.Skill, format string) (any, error) {
	schema, err := mcpserver.Schema(sk)
	if err != nil {
		return nil, err
	}
	switch format {
	case "openai":
		return map[string]any{
			"type": "function",
			"function": map[string]any{
				"name":        sk.Name,
				"description": sk.Description,
				"parameters":  schema,
			},
		}, nil
	case "anthropic":
		return map[string]any{
			"name":         sk.Name,
			"description":  sk.Description,
			"input_schema": schema,
		}, nil
	case "mcp":
		// The very definition `skillrun mcp serve` lists.
		return mcpserver.Tool(sk)
	}
	in := inspection{Skill: sk}
	p, err := spec.Resolve(sk)
	if err != nil {
		in.PolicyRefusal = err.Error()
	} else {
		in.Policy = p
	}
	return in, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// listed is one row of `skill list`.
type listed struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Path        string `json:"path"`
	Valid       bool   `json:"valid"`
	// Entry is the entry point ("" for a skill used through its scripts).
	Entry    string   `json:"entry,omitempty"`
	Error    string   `json:"error,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

func skillListCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "list",
		Usage:     "find every skill (folder with SKILL.md) below a folder",
		ArgsUsage: "DIR",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table or json"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return e.usageError("skill list: requires exactly 1 argument, the folder to search")
			}
			format, err := e.formatFlag(c, "table", "json")
			if err != nil {
				return err
			}
			root := c.Args().First()
			if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
				return e.usageError("skill list: %q is not a folder", root)
			}
			found, err := mcpserver.FindSkills(root)
			if err != nil {
				return fmt.Errorf("skill list %q: %w", root, err)
			}
			rows := make([]listed, 0, len(found))
			for _, dir := range found {
				r := listed{Path: dir, Name: filepath.Base(dir)}
				sk, err := spec.Load(dir)
				if err != nil {
					r.Error = strings.ReplaceAll(err.Error(), "\n", "; ")
				} else {
					r.Name, r.Description, r.Valid = sk.Name, sk.Description, true
					r.Entry, r.Warnings = sk.Entry.Path, sk.Warnings
				}
				rows = append(rows, r)
			}
			if format == "json" {
				return writeJSON(e.stdout, rows)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVALID\tPATH\tDESCRIPTION")
			for _, r := range rows {
				desc := r.Description
				if !r.Valid {
					desc = "error: " + r.Error
				}
				if len(desc) > 72 {
					desc = desc[:69] + "..."
				}
				fmt.Fprintf(tw, "%s\t%t\t%s\t%s\n", r.Name, r.Valid, r.Path, desc)
			}
			return tw.Flush()
		},
	}
}

func skillBundleCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "bundle",
		Usage:     "write the OCI bundle that runs a skill, or a command in its sandbox (then: skillrun run BUNDLE)",
		ArgsUsage: "DIR [-- CMD [ARG...]]",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "bundle folder to create (must be missing or empty)", Required: true},
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "input JSON, validated and turned into arguments for argparse skills"},
			&cli.StringFlag{Name: "platform", Value: "linux", Usage: "linux or darwin"},
		}, append(policyFlags(), depsFlags()...)...),
		Action: func(c *cli.Context) error {
			// skill bundle DIR [-- CMD...]: the command, when given, runs
			// instead of the entry point.
			args := c.Args().Slice()
			if len(args) == 0 {
				return e.usageError("skill bundle: requires the skill folder: skill bundle -o BUNDLE DIR [-- CMD...]")
			}
			var command []string
			if len(args) > 1 {
				if args[1] != "--" {
					return e.usageError("skill bundle: %q after the skill folder: flags go before DIR, a command after --", args[1])
				}
				command = args[2:]
			}
			sk, err := e.loadSkillDir(c, args[0])
			if err != nil {
				return err
			}
			opts, err := e.policyOptions(c)
			if err != nil {
				return err
			}
			opts.Platform = c.String("platform")
			if len(command) == 0 && !sk.HasEntry() {
				command = []string{"/bin/sh"}
				e.log.Warnf("skill %q has no entry point: the bundle runs /bin/sh (give the command to bundle after --)", sk.Name)
			}
			if len(command) > 0 {
				opts.Exec = &runner.Exec{Exec: spec.Exec{Args: command}}
			}
			if !sk.Deps.Empty() && opts.Platform == "linux" {
				// The bundle mounts the skill's environment, built first
				// when missing.
				rt, err := e.skillEngine(c)
				if err != nil {
					return err
				}
				if opts.Deps, err = e.depsManager(c, rt, true); err != nil {
					return err
				}
			}
			// The input is optional here: the bundled process reads its
			// input from stdin when run. Given, it is validated and, for
			// argparse skills, baked into the command line.
			var argv []string
			if c.IsSet("input") {
				in, err := runner.NewInput(sk, []byte(c.String("input")))
				if err != nil {
					return e.failCode(runner.ExitBadInput, fmt.Errorf("skill %q: %w", sk.Name, err))
				}
				argv = in.Argv()
			}
			out := c.String("output")
			_, statErr := os.Stat(out)
			existed := statErr == nil
			if _, err := runner.Bundle(hostDevices(), out, sk, argv, opts); err != nil {
				if !existed {
					os.RemoveAll(out)
				}
				var pe *spec.PolicyError
				switch {
				case errors.As(err, &pe):
					return e.failCode(runner.ExitPolicy, fmt.Errorf("skill %q: policy refusal: %w", sk.Name, err))
				case runner.IsInputError(err):
					return e.failCode(runner.ExitBadInput, fmt.Errorf("skill %q: %w", sk.Name, err))
				}
				return fmt.Errorf("skill bundle %q: %w", sk.Name, err)
			}
			fmt.Fprintln(e.stdout, out)
			return nil
		},
	}
}
