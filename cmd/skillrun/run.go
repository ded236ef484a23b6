package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/internal/sigfwd"
	"github.com/skillrun/skillrun/runtime"
)

func runCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "create and run a container",
		ArgsUsage: "<container-id> | <bundle-dir>",
		Description: joinLines(
			`The run command creates an instance of a container for a bundle and runs it.`,
			`With a single argument that is a directory holding config.json and no --bundle,`,
			`that directory is the bundle and the container ID is generated:`,
			``,
			`    skillrun run ./bundle`,
			`    skillrun run -b ./bundle mycontainer`,
			``,
			`In the foreground it exits with the container's status (128+N when the`,
			`container's init was killed by signal N) and forwards signals to it.`),
		Flags: append(createFlags(),
			&cli.BoolFlag{Name: "detach", Aliases: []string{"d"}, Usage: "detach from the container's process"},
			&cli.BoolFlag{Name: "keep", Usage: "do not delete the container after it exits"},
		),
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 1, 1); err != nil {
				return err
			}
			id, bundle := c.Args().First(), ""
			if !c.IsSet("bundle") {
				switch {
				case isBundleDir(id):
					bundle, id = id, generatedID()
				case strings.ContainsRune(id, '/'):
					// A path, not an ID: say what is wrong with it.
					if _, err := runtime.LoadBundle(id); err != nil {
						return fmt.Errorf("run %s: not a bundle: %w", id, err)
					}
				}
			}
			rt, err := e.engine(c)
			if err != nil {
				return err
			}
			prepare(rt)
			opts := runtime.RunOpts{
				CreateOpts: e.createOpts(c, bundle),
				Detach:     c.Bool("detach"),
				Keep:       c.Bool("keep"),
			}
			if !opts.Detach {
				sigs, stop := forwardSignals()
				defer stop()
				opts.Signals = sigs
			}
			status, err := rt.Run(c.Context, id, opts)
			if err != nil {
				return err
			}
			if status != 0 {
				return exitStatus(status)
			}
			return nil
		},
	}
}

// isBundleDir reports whether arg names a directory holding config.json.
func isBundleDir(arg string) bool {
	fi, err := os.Stat(filepath.Join(arg, runtime.ConfigName))
	return err == nil && fi.Mode().IsRegular()
}

// generatedID is a fresh container ID for `run BUNDLE`.
func generatedID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "skillrun-" + hex.EncodeToString(b)
}

// forwardSignals relays every signal a foreground run or exec forwards
// to its container (internal/sigfwd: runc's set, most of it without the
// per-signal cost of os/signal) to the returned channel, until stop.
func forwardSignals() (sigs chan os.Signal, stop func()) {
	sigs = make(chan os.Signal, 128)
	return sigs, sigfwd.Notify(sigs).Stop
}
