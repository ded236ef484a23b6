//go:build linux

package main

import "github.com/skillrun/skillrun/runtime/linux"

// versionExtra reports what the back end adds (the libseccomp linked in).
func versionExtra() []string { return linux.VersionInfo() }
