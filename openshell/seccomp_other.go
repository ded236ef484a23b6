//go:build !linux

package openshell

import specs "github.com/opencontainers/runtime-spec/specs-go"

// supervisorSeccomp: seccomp exists on Linux only.
func supervisorSeccomp(*specs.Spec) (*specs.LinuxSeccomp, error) { return nil, nil }
