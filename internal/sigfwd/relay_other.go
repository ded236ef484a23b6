//go:build !linux || !cgo

package sigfwd

import (
	"errors"
	"os"
)

// No C relay here: a Relay is signal.Notify(c) of every signal.
func forwarded() []os.Signal { return nil }

func install() (*os.File, int, uint64, error) { return nil, -1, 0, errors.ErrUnsupported }

func uninstall(int, uint64) {}
