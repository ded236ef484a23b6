package main

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

func killCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "kill",
		Usage:     "kill sends the specified signal (default: SIGTERM) to the container's init process",
		ArgsUsage: "<container-id> [signal]",
		Description: joinLines(
			`The kill command sends a signal to the container's init process. The signal`,
			`is a name (KILL, SIGKILL) or a number (9); the default is SIGTERM.`),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "send the signal to all processes in the container"},
		},
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 1, 2); err != nil {
				return err
			}
			sigstr := c.Args().Get(1)
			if sigstr == "" {
				sigstr = "SIGTERM"
			}
			sig, err := parseSignal(sigstr)
			if err != nil {
				return err
			}
			rt, err := e.engine(c)
			if err != nil {
				return err
			}
			return rt.Kill(c.Context, c.Args().First(), sig, c.Bool("all"))
		},
	}
}

// parseSignal accepts a number or a name with or without "SIG", in any
// case. 0 checks that the process exists, as kill(2) does.
func parseSignal(raw string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(raw); err == nil {
		if n < 0 || n > 64 {
			return 0, fmt.Errorf("unknown signal %q", raw)
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(raw)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	s := unix.SignalNum(name)
	if s == 0 {
		return 0, fmt.Errorf("unknown signal %q", raw)
	}
	return s, nil
}
