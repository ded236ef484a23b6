package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/runtime"
)

func execCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "execute new process inside the container",
		ArgsUsage: "<container-id> <command> [command options]  ||  -p process.json <container-id>",
		Description: joinLines(
			`The exec command runs a new process in a running container, from the`,
			`command line or from an OCI process JSON file (--process).`),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "console-socket", Usage: "path to an AF_UNIX socket which will receive a file descriptor referencing the master end of the console's pseudoterminal"},
			&cli.StringFlag{Name: "cwd", Usage: "current working directory in the container"},
			&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "set environment variables"},
			&cli.BoolFlag{Name: "tty", Aliases: []string{"t"}, Usage: "allocate a pseudo-TTY"},
			&cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "UID (format: <uid>[:<gid>])"},
			&cli.Int64SliceFlag{Name: "additional-gids", Aliases: []string{"g"}, Usage: "additional gids"},
			&cli.StringFlag{Name: "process", Aliases: []string{"p"}, Usage: "path to the process.json"},
			&cli.BoolFlag{Name: "detach", Aliases: []string{"d"}, Usage: "detach from the container's process"},
			&cli.StringFlag{Name: "pid-file", Usage: "specify the file to write the process id to"},
			&cli.StringSliceFlag{Name: "cap", Aliases: []string{"c"}, Usage: "add a capability to the bounding set for the process"},
			&cli.BoolFlag{Name: "no-new-privs", Usage: "set the no new privileges value for the process"},
			&cli.IntFlag{Name: "preserve-fds", Usage: "Pass N additional file descriptors to the container (stdio + $LISTEN_FDS + N in total)"},
			&cli.StringSliceFlag{Name: "cgroup", Usage: "run the process in an (existing) sub-cgroup(s). Format is [<controller>:]<cgroup>."},
			&cli.BoolFlag{Name: "ignore-paused", Usage: "allow exec in a paused container"},
		},
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 1, -1); err != nil {
				return err
			}
			status, err := e.exec(c)
			if err != nil {
				// runc exits 255 when the process could not be run.
				return &exitError{code: 255, err: fmt.Errorf("exec failed: %w", err)}
			}
			if status != 0 {
				return exitStatus(status)
			}
			return nil
		},
	}
}

// exec runs the process of an exec command line and returns its status.
func (e *env) exec(c *cli.Context) (int, error) {
	id := c.Args().First()
	sub, err := subCgroupPaths(c.StringSlice("cgroup"))
	if err != nil {
		return -1, err
	}
	rt, err := e.engine(c)
	if err != nil {
		return -1, err
	}
	p, err := e.execProcess(c, rt, id)
	if err != nil {
		return -1, err
	}
	opts := runtime.ExecOpts{
		Process:        p,
		Detach:         c.Bool("detach"),
		PidFile:        c.String("pid-file"),
		ConsoleSocket:  c.String("console-socket"),
		PreserveFDs:    c.Int("preserve-fds"),
		Stdio:          runtime.Stdio{Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr},
		IgnorePaused:   c.Bool("ignore-paused"),
		SubCgroupPaths: sub,
	}
	if !opts.Detach {
		sigs, stop := forwardSignals()
		defer stop()
		opts.Signals = sigs
	}
	return rt.Exec(c.Context, id, opts)
}

// subCgroupPaths parses exec --cgroup values: one PATH (every controller,
// or cgroup v2), or any number of CONTROLLER[,CONTROLLER...]:PATH (cgroup
// v1). The errors are runc's (1.1's for more than one ':', 1.2's for empty
// and repeated controllers). Whether a path exists and stays below the
// container's cgroup is checked when the process joins it.
func subCgroupPaths(args []string) (map[string]string, error) {
	if len(args) == 0 {
		return nil, nil
	}
	paths := make(map[string]string, len(args))
	for _, a := range args {
		// runc 1.1 refuses a second ':' (runc 1.2 and later keep it in
		// the path and fail when joining).
		if strings.Count(a, ":") > 1 {
			return nil, fmt.Errorf("invalid --cgroup argument: %s", a)
		}
		ctrls, path, ok := strings.Cut(a, ":")
		if !ok {
			if len(args) != 1 {
				return nil, fmt.Errorf("invalid --cgroup argument: %s (missing <controller>: prefix)", a)
			}
			paths[""] = a
			continue
		}
		for _, ctrl := range strings.Split(ctrls, ",") {
			if ctrl == "" {
				return nil, fmt.Errorf("invalid --cgroup argument: %s (empty <controller> prefix)", a)
			}
			if _, dup := paths[ctrl]; dup {
				return nil, fmt.Errorf("invalid --cgroup argument(s): controller %s specified multiple times", ctrl)
			}
			paths[ctrl] = path
		}
	}
	return paths, nil
}

// execProcess builds the process from --process, or from the container's
// config.json process with the command line's overrides, as runc does.
func (e *env) execProcess(c *cli.Context, rt runtime.Runtime, id string) (*specs.Process, error) {
	if path := c.String("process"); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read process file: %w", err)
		}
		var p specs.Process
		if err := json.Unmarshal(data, &p); err != nil {
			return nil, fmt.Errorf("process file %s: %w", path, err)
		}
		return &p, runtime.ValidateProcess(&p)
	}
	st, err := rt.State(c.Context, id)
	if err != nil {
		return nil, err
	}
	if c.NArg() < 2 {
		return nil, errors.New("exec args cannot be empty")
	}
	spec, err := runtime.LoadBundle(st.Bundle)
	if err != nil {
		return nil, err
	}
	p := spec.Process
	p.Args = c.Args().Slice()[1:]
	if cwd := c.String("cwd"); cwd != "" {
		p.Cwd = cwd
	}
	if caps := c.StringSlice("cap"); len(caps) > 0 {
		if p.Capabilities == nil {
			p.Capabilities = &specs.LinuxCapabilities{}
		}
		for _, cp := range caps {
			p.Capabilities.Bounding = append(p.Capabilities.Bounding, cp)
			p.Capabilities.Effective = append(p.Capabilities.Effective, cp)
			p.Capabilities.Permitted = append(p.Capabilities.Permitted, cp)
		}
	}
	p.Env = append(p.Env, c.StringSlice("env")...)
	p.Terminal = c.Bool("tty")
	if c.IsSet("no-new-privs") {
		p.NoNewPrivileges = c.Bool("no-new-privs")
	}
	if u := c.String("user"); u != "" {
		uids, gids, ok := strings.Cut(u, ":")
		if ok {
			gid, err := strconv.ParseUint(gids, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("--user: bad gid %q", gids)
			}
			p.User.GID = uint32(gid)
		}
		uid, err := strconv.ParseUint(uids, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--user: bad uid %q", uids)
		}
		p.User.UID = uint32(uid)
	}
	for _, g := range c.Int64Slice("additional-gids") {
		if g < 0 {
			return nil, fmt.Errorf("additional-gids must be a positive number %d", g)
		}
		p.User.AdditionalGids = append(p.User.AdditionalGids, uint32(g))
	}
	return p, runtime.ValidateProcess(p)
}
