//go:build runtimeonly

package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/runtime"
)

// skillrun built with the runtimeonly tag is the OCI runtime alone (see
// companion.go): its skill, sandbox and mcp commands exec skillrun-skills.

const skillsWhat = "skillrun's skills runner"

func skillCommand(e *env) *cli.Command {
	return delegateCommand(e, "skill", skillUsage, "", skillsBinary, skillsWhat)
}

func sandboxCommand(e *env) *cli.Command {
	return delegateCommand(e, "sandbox", sandboxUsage, "[flags] -- CMD [ARG...]", skillsBinary, skillsWhat)
}

func mcpCommand(e *env) *cli.Command {
	return delegateCommand(e, "mcp", mcpUsage, "", skillsBinary, skillsWhat)
}

// withEgressHelper makes skillrun-skills the egress server of a bundle
// that asks for a network allowlist: this binary links none.
func withEgressHelper(o runtime.Options) runtime.Options {
	o.EgressHelper = func() (string, error) {
		exe, _ := os.Executable()
		return findCompanion(exe, skillsBinary, "the network allowlist's egress server")
	}
	return o
}
