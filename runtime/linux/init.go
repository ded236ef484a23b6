//go:build linux

package linux

import (
	"github.com/opencontainers/runc/libcontainer"
	// nsenter's C constructor runs before the Go runtime in `skillrun init`
	// and sets up namespaces (nsexec); it returns at once otherwise.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
	// The device cgroup manager (devices controller, eBPF on v2).
	_ "github.com/opencontainers/cgroups/devices"
)

// Init is the container init, run as `skillrun init` when libcontainer
// re-executes this binary. It never returns.
func Init() {
	libcontainer.Init()
}
