//go:build !runtimeonly

package main

import "github.com/skillrun/skillrun/runtime"

// withEgressHelper leaves the egress server of an annotated bundle to this
// binary, which links it (egresshelper_linux.go).
func withEgressHelper(o runtime.Options) runtime.Options { return o }
