//go:build !linux

package openshell

import (
	"errors"
	"net"
)

// Listen is only implemented on Linux (SO_PEERCRED).
func Listen(path string) (net.Listener, error) {
	return nil, errors.New("openshell driver socket: only supported on Linux")
}
