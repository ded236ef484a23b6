//go:build linux

package linux

import (
	"fmt"

	"github.com/opencontainers/runc/libcontainer/seccomp"
)

// VersionInfo is what `skillrun --version` adds for this back end: the
// libseccomp linked into the build.
func VersionInfo() []string {
	major, minor, micro := seccomp.Version()
	if major+minor+micro == 0 {
		return []string{"libseccomp: not compiled in"}
	}
	return []string{fmt.Sprintf("libseccomp: %d.%d.%d", major, minor, micro)}
}
