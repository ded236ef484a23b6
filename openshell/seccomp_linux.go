//go:build linux

package openshell

import (
	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// supervisorSeccomp is Docker's default seccomp profile for s, with the
// rules its capabilities and architecture select.
func supervisorSeccomp(s *specs.Spec) (*specs.LinuxSeccomp, error) {
	return seccomp.GetDefaultProfile(s)
}
