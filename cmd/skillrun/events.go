package main

import (
	"encoding/json"
	"os"
	"os/signal"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/runtime"
)

func eventsCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:        "events",
		Usage:       "display container events such as OOM notifications, cpu, memory, and IO usage statistics",
		ArgsUsage:   "<container-id>",
		Description: "The events command displays information about the container. By default the information is displayed once every 5 seconds.",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "interval", Value: 5 * time.Second, Usage: "set the stats collection interval"},
			&cli.BoolFlag{Name: "stats", Usage: "display the container's stats then exit"},
		},
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 1, 1); err != nil {
				return err
			}
			rt, err := e.engine(c)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, unix.SIGTERM)
			defer stop()
			enc := json.NewEncoder(e.stdout)
			return rt.Events(ctx, c.Args().First(),
				runtime.EventsOpts{Interval: c.Duration("interval"), Stats: c.Bool("stats")},
				func(ev runtime.Event) error { return enc.Encode(ev) })
		},
	}
}
