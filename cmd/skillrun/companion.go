package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/urfave/cli/v2"
)

// skillrun is three binaries, built from this package with different tags
// (Makefile) and installed side by side:
//
//   - skillrun (tag runtimeonly): the OCI runtime. Every verb containerd's
//     shim, podman or CRI calls, and every container's init, pays its
//     binary's package initialisation; this one links neither the skill
//     model (YAML, JSON Schema), the MCP SDK nor the egress server (HTTP,
//     TLS). Its skill, sandbox and mcp commands exec skillrun-skills, and
//     a bundle that asks for a network allowlist gets its egress server
//     from there too (runtime.Options.EgressHelper).
//   - skillrun-skills (no tag): the whole program, the skills runner.
//   - skillrun-openshell (tag openshell): the whole program and the
//     OpenShell compute driver (gRPC, the OCI image stack), which skillrun
//     openshell-driver execs.
const (
	skillsBinary    = "skillrun-skills"
	openshellBinary = "skillrun-openshell"

	openshellCommandName = "openshell-driver"
	openshellUsage       = "serve OpenShell's compute driver gRPC API on a Unix socket"

	skillUsage   = "validate, inspect, bundle and run Agent Skills"
	sandboxUsage = "run any command in a one-off sandbox: the current folder (or --workspace) at /workspace, no network, no host secrets"
	mcpUsage     = "serve skills to agents over the Model Context Protocol"
)

// findCompanion is the companion binary named binary: beside exe (this
// program's own path), else in PATH. what says what it is, for the error
// that none was found.
func findCompanion(exe, binary, what string) (string, error) {
	if exe != "" {
		p := filepath.Join(filepath.Dir(exe), binary)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(binary); err == nil {
		return p, nil
	} else if !errors.Is(err, exec.ErrNotFound) {
		return "", fmt.Errorf("%s: %w", binary, err)
	}
	where := "in PATH"
	if exe != "" {
		where = "beside " + exe + " or in PATH"
	}
	return "", fmt.Errorf("%s is the separate binary %s, and none was found %s: install it beside skillrun (the release tarball and make both provide bin/%s)",
		what, binary, where, binary)
}

// delegateCommand is a command of skillrun carried out by a companion
// binary: it execs binary with this process' command line (global flags
// included), so that `skillrun VERB ...` works the same whichever binary
// implements VERB. --help without the companion says where it belongs.
func delegateCommand(e *env, name, usage, argsUsage, binary, what string) *cli.Command {
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		ArgsUsage: argsUsage,
		Description: joinLines(
			`Carried out by `+binary+` (`+what+`), installed beside skillrun: this`,
			`command runs it with the same arguments (see `+binary+` `+name+` --help).`),
		SkipFlagParsing: true,
		HideHelp:        true,
		Action: func(c *cli.Context) error {
			exe, _ := os.Executable()
			bin, err := findCompanion(exe, binary, name+": "+what)
			if err != nil {
				if a := c.Args().First(); a == "--help" || a == "-h" {
					// The companion's own help lists the flags; without
					// it, this one says where it is.
					return cli.ShowSubcommandHelp(c)
				}
				return err
			}
			if e.execve == nil {
				return fmt.Errorf("%s: cannot exec %s here", name, bin)
			}
			// argv[0] stays what the caller ran (ps shows "skillrun
			// skill run ..."), as the C constructor leaves it.
			if err := e.execve(bin, e.argv, os.Environ()); err != nil {
				return &exitError{code: 126, err: fmt.Errorf("%s: %w", bin, err)}
			}
			return nil
		},
	}
}
