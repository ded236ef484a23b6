//go:build linux

package linux

import (
	"fmt"

	devices "github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/selinux/go-selinux"
)

// relaxConfig smooths places where libcontainer v1.5 refuses configs
// that runc 1.1 (what containerd, podman and the OCI validation suite were
// written against) accepts, or that cannot mean anything on this host, and
// says what it changed:
//
//   - A FIFO device ("p") has no device number: mknod ignores it, and v1.5
//     then fails its own check that the node's major:minor match the config.
//   - A bind mount's filesystem options (size=, mode=) are ignored by the
//     kernel for binds; v1.5 rejects them, runc 1.1 ignored them.
//   - A mount label on a host without SELinux (below).
func relaxConfig(c *configs.Config) []string {
	var warns []string
	for _, d := range c.Devices {
		if d.Type == devices.FifoDevice && (d.Major != 0 || d.Minor != 0) {
			d.Major, d.Minor = 0, 0
		}
	}
	for _, m := range c.Mounts {
		if m.IsBind() && m.Data != "" {
			warns = append(warns, fmt.Sprintf("mount %s: bind mounts ignore filesystem options %q", m.Destination, m.Data))
			m.Data = ""
		}
	}
	// A mount label without SELinux: libcontainer passes it to every
	// mount as context=, which the kernel rejects (EINVAL), so the
	// container cannot start. With no SELinux there is nothing to label;
	// crun ignores it too (runtime-tools linux_mount_label).
	if c.MountLabel != "" && !selinux.GetEnabled() {
		warns = append(warns, fmt.Sprintf("mountLabel %q ignored: SELinux is not enabled on this host", c.MountLabel))
		c.MountLabel = ""
	}
	return warns
}
