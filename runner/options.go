package runner

import (
	"context"
	"io"
	"os"

	"github.com/skillrun/skillrun/spec"
)

// Options are one run's settings: the operator's grants (spec.Grants,
// shared as they are by the CLI, the MCP server and spec) and how the
// runner itself works. Zero values mean "the manifest's value, else the
// default".
type Options struct {
	spec.Grants
	// TempDir is where the private bundle folder is made (default
	// DefaultTempDir()). As root it must be traversable by the sandbox's
	// host user.
	TempDir string
	// Platform is the spec platform (default "linux").
	Platform string
	// ID is the container ID (default "skill-NAME-RANDOM").
	ID string
	// Warn receives warnings (grants beyond the manifest); nil discards.
	Warn func(string)
	// Deps provides the dependency environment of a skill that declares
	// packages (package skillenv); nil runs such a skill without one.
	Deps DepsProvider
	// Command, when set, runs instead of the skill's entry point, in the
	// skill's sandbox, with CommandEnv added to its environment: the
	// runner's own programs (the dependency builder). The input is not
	// checked against the skill's schema then.
	Command    []string
	CommandEnv map[string]string
	// Exec, when set, runs a command in the skill's sandbox instead of its
	// entry point (skill exec; in spec.Bare's sandbox: skillrun sandbox),
	// with the skill's dependency environment first on PATH.
	Exec *Exec
}

// Exec is a command to run in a sandbox (Options.Exec).
type Exec struct {
	spec.Exec
	// Stdin is the command's standard input (nil: empty).
	Stdin io.Reader
	// Stdout and Stderr, when set, receive the command's output as it
	// comes (up to the output limit, like the result's copy).
	Stdout, Stderr io.Writer
}

// DepsProvider gives a run the skill's prepared dependency environment.
type DepsProvider interface {
	// Acquire returns the environment of sk, building it first when the
	// provider may; release is called once the run no longer needs it.
	Acquire(ctx context.Context, sk *spec.Skill) (env *spec.DepsEnv, info *EnvInfo, release func(), err error)
}

// platform is the spec platform of opts.
func (o *Options) platform() string {
	if o.Platform == "" {
		return "linux"
	}
	return o.Platform
}

// DefaultTempDir is where Run makes bundle folders when Options.TempDir
// is empty: $TMPDIR when set, else /dev/shm when it is a world-writable
// sticky tmpfs folder (a bundle is ~30 small files and folders, written
// and removed on every run: on a loaded disk file system that alone costs
// ~10 ms, on tmpfs ~1 ms), else /tmp.
func DefaultTempDir() string {
	if d := os.Getenv("TMPDIR"); d != "" {
		return d
	}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() && fi.Mode()&os.ModeSticky != 0 && fi.Mode().Perm()&0o003 == 0o003 {
		return "/dev/shm"
	}
	return "/tmp"
}
