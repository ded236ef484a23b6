//go:build linux

package main

import (
	"fmt"

	"github.com/opencontainers/runc/libcontainer/seccomp"
)

// versionExtra reports the libseccomp linked into this build.
func versionExtra() []string {
	major, minor, micro := seccomp.Version()
	if major+minor+micro == 0 {
		return []string{"libseccomp: not compiled in"}
	}
	return []string{fmt.Sprintf("libseccomp: %d.%d.%d", major, minor, micro)}
}
