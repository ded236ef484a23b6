package main

import (
	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/runtime"
)

// createFlags are runc's create flags, shared with run.
func createFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "bundle", Aliases: []string{"b"}, Usage: "path to the root of the bundle directory, defaults to the current directory"},
		&cli.StringFlag{Name: "console-socket", Usage: "path to an AF_UNIX socket which will receive a file descriptor referencing the master end of the console's pseudoterminal"},
		&cli.StringFlag{Name: "pid-file", Usage: "specify the file to write the process id to"},
		&cli.BoolFlag{Name: "no-pivot", Usage: "do not use pivot root to jail process inside rootfs. This should be used whenever the rootfs is on top of a ramdisk"},
		&cli.BoolFlag{Name: "no-new-keyring", Usage: "do not create a new session keyring for the container. This will cause the container to inherit the calling processes session key"},
		&cli.BoolFlag{Name: "accept-degradation", Usage: "macOS: run a config with fields Seatbelt cannot enforce (ignored with a warning; see skillrun spec --explain) instead of refusing it"},
		&cli.IntFlag{Name: "preserve-fds", Usage: "Pass N additional file descriptors to the container (stdio + $LISTEN_FDS + N in total)"},
	}
}

// createOpts reads the create flags. The container's stdio is ours: after
// a successful create the caller's pipes belong to the container.
func (e *env) createOpts(c *cli.Context, bundle string) runtime.CreateOpts {
	if bundle == "" {
		bundle = c.String("bundle")
	}
	return runtime.CreateOpts{
		Bundle:        bundle,
		PidFile:       c.String("pid-file"),
		ConsoleSocket: c.String("console-socket"),
		NoPivot:       c.Bool("no-pivot"),
		NoNewKeyring:  c.Bool("no-new-keyring"),
		PreserveFDs:   c.Int("preserve-fds"),
		Stdio:         runtime.Stdio{Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr},
	}
}

func createCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "create",
		Usage:     "create a container",
		ArgsUsage: "<container-id>",
		Description: joinLines(
			`The create command creates an instance of a container for a bundle. The bundle`,
			`is a directory with a specification file named "config.json" and a root`,
			`filesystem. The container's init waits until "skillrun start" releases it.`),
		Flags: createFlags(),
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 1, 1); err != nil {
				return err
			}
			rt, err := e.engine(c)
			if err != nil {
				return err
			}
			prepare(rt)
			return rt.Create(c.Context, c.Args().First(), e.createOpts(c, ""))
		},
	}
}
