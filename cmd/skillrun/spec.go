package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/seatbelt"
)

func specCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "spec",
		Usage: "create a new specification file",
		Description: joinLines(
			`The spec command writes runc's example config.json into the bundle directory`,
			`(default: the current directory). With --rootless the configuration maps the`,
			`calling user to root in a user namespace, for containers run by that user.`,
			``,
			`With --explain it writes nothing and prints, as JSON, how the bundle's`,
			`config.json translates to macOS Seatbelt: every field classified enforced,`,
			`degraded (with what is lost) or rejected. It works on any OS.`,
			``,
			`To turn an Agent Skill into a hardened bundle, use "skillrun skill bundle".`),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "bundle", Aliases: []string{"b"}, Usage: "path to the root of the bundle directory"},
			&cli.BoolFlag{Name: "rootless", Usage: "generate a configuration for a rootless container"},
			&cli.BoolFlag{Name: "explain", Usage: "print how the bundle's config.json maps to macOS Seatbelt (enforced / degraded / rejected), as JSON"},
		},
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 0, 0); err != nil {
				return err
			}
			if c.Bool("explain") {
				spec, err := runtime.LoadBundle(c.String("bundle"))
				if err != nil {
					return err
				}
				enc := json.NewEncoder(e.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(seatbelt.Explain(spec))
			}
			spec, err := exampleSpec(c.Bool("rootless"))
			if err != nil {
				return err
			}
			path := filepath.Join(c.String("bundle"), runtime.ConfigName)
			if _, err := os.Stat(path); err == nil {
				return fmt.Errorf("File %s exists. Remove it first", runtime.ConfigName)
			} else if !errors.Is(err, os.ErrNotExist) {
				return err
			}
			data, err := json.MarshalIndent(spec, "", "\t")
			if err != nil {
				return err
			}
			return os.WriteFile(path, data, 0o666)
		},
	}
}
