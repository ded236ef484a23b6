//go:build darwin

package darwin

import (
	"fmt"
	"os"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/seatbelt"
)

// New returns the Seatbelt back end; opts.AcceptDegradation sets
// Config.AcceptDegradation.
func New(opts runtime.Options) (runtime.Runtime, error) {
	return NewWithConfig(opts, Config{AcceptDegradation: opts.AcceptDegradation})
}

// NewWithConfig returns the Seatbelt back end. The init is this
// executable re-run as `<exe> init` (main must route it to Init), and it
// execs /usr/bin/sandbox-exec with the translated profile.
func NewWithConfig(opts runtime.Options, cfg Config) (runtime.Runtime, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("darwin back end: locate own executable: %w", err)
	}
	e, err := newEngine(opts, cfg, launcher{
		initPath: exe,
		initArgs: []string{"skillrun", "init"},
		command: func(p *seatbelt.Profile, profileFile string) []string {
			return p.Command(profileFile)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("darwin back end: %w", err)
	}
	return e, nil
}
