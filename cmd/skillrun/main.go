// Command skillrun is a runc-compatible OCI runtime and a sandboxed runner
// for AI agent skills.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}
