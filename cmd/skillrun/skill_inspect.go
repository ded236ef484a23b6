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
				fmt.Fprintf(e.stdout, "%s: ok (%s, entry %s, input %s)\n", dir, sk.Name, sk.Entry.Path, sk.Input.Source)
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
			format := c.String("format")
			switch format {
			case "json", "openai", "anthropic", "mcp":
			default:
				return e.usageError("--format: %q is not json, openai, anthropic or mcp", format)
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
	Error       string `json:"error,omitempty"`
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
			format := c.String("format")
			if format != "table" && format != "json" {
				return e.usageError("--format: %q is not table or json", format)
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
		Usage:     "write the OCI bundle that runs a skill (then: skillrun run BUNDLE)",
		ArgsUsage: "DIR",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "bundle folder to create (must be missing or empty)", Required: true},
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "input JSON, validated and turned into arguments for argparse skills"},
			&cli.StringFlag{Name: "platform", Value: "linux", Usage: "linux or darwin"},
		}, append(policyFlags(), depsFlags()...)...),
		Action: func(c *cli.Context) error {
			sk, err := e.loadSkill(c)
			if err != nil {
				return err
			}
			opts, err := e.policyOptions(c)
			if err != nil {
				return err
			}
			opts.Platform = c.String("platform")
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
