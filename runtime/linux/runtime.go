//go:build linux

package linux

import (
	"errors"

	"github.com/skillrun/skillrun/runtime"
)

// New returns the libcontainer back end.
func New(opts runtime.Options) (runtime.Runtime, error) {
	return nil, errors.New("linux back end: not yet built")
}
