package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

func psCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "ps",
		Usage:     "ps displays the processes running inside a container",
		ArgsUsage: "<container-id> [ps options]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "table", Usage: "select one of: table or json"},
		},
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 1, -1); err != nil {
				return err
			}
			rt, err := e.engine(c)
			if err != nil {
				return err
			}
			pids, err := rt.Ps(c.Context, c.Args().First())
			if err != nil {
				return err
			}
			switch c.String("format") {
			case "json":
				if pids == nil {
					pids = []int{}
				}
				return json.NewEncoder(e.stdout).Encode(pids)
			case "table":
				args := c.Args().Slice()[1:]
				if len(args) == 0 {
					args = []string{"-ef"}
				}
				return psTable(e, pids, args)
			default:
				return fmt.Errorf("invalid format option %q (want table or json)", c.String("format"))
			}
		},
	}
}

// psTable runs ps(1) with args and keeps the header and the container's
// processes, as runc does.
func psTable(e *env, pids []int, args []string) error {
	out, err := exec.Command("ps", args...).Output()
	if err != nil {
		return fmt.Errorf("ps: %w", err)
	}
	lines := strings.Split(string(bytes.TrimRight(out, "\n")), "\n")
	col := -1
	for i, f := range strings.Fields(lines[0]) {
		if f == "PID" {
			col = i
			break
		}
	}
	if col < 0 {
		return fmt.Errorf("ps: no PID column in output of ps %s", strings.Join(args, " "))
	}
	want := make(map[int]bool, len(pids))
	for _, p := range pids {
		want[p] = true
	}
	fmt.Fprintln(e.stdout, lines[0])
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) <= col {
			continue
		}
		if pid, err := strconv.Atoi(f[col]); err == nil && want[pid] {
			fmt.Fprintln(e.stdout, l)
		}
	}
	return nil
}
