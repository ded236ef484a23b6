//go:build darwin

package main

import (
	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/darwin"
)

const platform = "darwin"

func newBackend(opts runtime.Options) (runtime.Runtime, error) {
	return darwin.New(opts)
}
