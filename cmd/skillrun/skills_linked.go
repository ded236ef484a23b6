//go:build !runtimeonly

package main

import "github.com/skillrun/skillrun/runtime"

// withEgressHelper leaves the egress server of an annotated bundle to this
// binary, which links it (init_linux.go).
func withEgressHelper(o runtime.Options) runtime.Options { return o }

// skillsLinked says whether this binary carries out the skill verbs itself.
const skillsLinked = true
