//go:build linux

package linux

import (
	"github.com/opencontainers/runc/libcontainer/specconv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ExampleSpec is runc's example configuration (`runc spec`), adjusted for an
// unprivileged user when rootless is set.
func ExampleSpec(rootless bool) *specs.Spec {
	s := specconv.Example()
	if rootless {
		specconv.ToRootless(s)
	}
	return s
}
