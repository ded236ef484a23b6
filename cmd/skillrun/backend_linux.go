//go:build linux

package main

import (
	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/linux"
)

const platform = "linux"

func newBackend(opts runtime.Options) (runtime.Runtime, error) {
	return linux.New(opts)
}
