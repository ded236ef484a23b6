package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
)

func listCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:    "list",
		Aliases: []string{"ls"},
		Usage:   "lists containers started by skillrun with the given root",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "table", Usage: "select one of: table or json"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "display only container IDs"},
		},
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 0, 0); err != nil {
				return err
			}
			rt, err := e.engine(c)
			if err != nil {
				return err
			}
			states, warns, err := rt.List(c.Context)
			if err != nil {
				return err
			}
			for _, w := range warns {
				e.log.Warn(w)
			}
			if c.Bool("quiet") {
				for _, s := range states {
					fmt.Fprintln(e.stdout, s.ID)
				}
				return nil
			}
			switch c.String("format") {
			case "table":
				w := tabwriter.NewWriter(e.stdout, 12, 1, 3, ' ', 0)
				fmt.Fprint(w, "ID\tPID\tSTATUS\tBUNDLE\tCREATED\tOWNER\n")
				for _, s := range states {
					fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\n", s.ID, s.Pid, s.Status, s.Bundle, s.Created.Format(time.RFC3339Nano), s.Owner)
				}
				return w.Flush()
			case "json":
				return json.NewEncoder(e.stdout).Encode(states)
			default:
				return fmt.Errorf("invalid format option %q (want table or json)", c.String("format"))
			}
		},
	}
}
