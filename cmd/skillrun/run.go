package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

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
				sigs := notifyAll()
				defer stopNotify(sigs)
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

// notifyAll returns a channel that receives every signal once
// registration completes. Registering all ~65 signals costs 1-2 ms, so it
// happens in the background while the container is set up, as runc does;
// a signal that arrives before then gets its default action.
func notifyAll() chan os.Signal {
	sigs := make(chan os.Signal, 128)
	go signal.Notify(sigs)
	return sigs
}

// stopNotify undoes notifyAll without waiting for it. signal.Stop waits
// for the runtime's signal loop to go idle (it had every signal, SIGCHLD
// of the container's exit among them, to deliver): 1.4 ms measured on
// the exit path of every foreground run, right before the process exits
// anyway. In the background it costs nothing; a signal that arrives
// meanwhile lands in the buffered channel instead of its default action.
func stopNotify(sigs chan os.Signal) {
	go signal.Stop(sigs)
}
