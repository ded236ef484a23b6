//go:build darwin

package darwin

import (
	"errors"

	"github.com/skillrun/skillrun/runtime"
)

// New returns the Seatbelt back end.
func New(opts runtime.Options) (runtime.Runtime, error) {
	return nil, errors.New("darwin back end: not yet built")
}
