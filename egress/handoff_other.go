//go:build !linux

package egress

import (
	"context"
	"errors"
)

// errUnsupported is returned off Linux: the allowlist needs network
// namespaces.
var errUnsupported = errors.New("egress: network allowlists need Linux network namespaces")

// Handoff is Linux-only.
type Handoff struct{}

// Listen fails off Linux.
func Listen(string, int, int) (*Handoff, error) { return nil, errUnsupported }

// Path is "".
func (h *Handoff) Path() string { return "" }

// Close does nothing.
func (h *Handoff) Close() error { return nil }

// Accept fails off Linux.
func (h *Handoff) Accept(context.Context, []int) (*Sockets, error) { return nil, errUnsupported }
