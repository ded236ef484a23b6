//go:build linux

package linux

import (
	"strings"
	"testing"

	devices "github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/selinux/go-selinux"
	"golang.org/x/sys/unix"
)

func TestRelaxConfig(t *testing.T) {
	fifo := &devices.Device{Path: "/dev/f", Rule: devices.Rule{Type: devices.FifoDevice, Major: 8, Minor: 666}}
	char := &devices.Device{Path: "/dev/c", Rule: devices.Rule{Type: devices.CharDevice, Major: 1, Minor: 3}}
	bind := &configs.Mount{Destination: "/etc", Flags: unix.MS_BIND, Data: "mode=755,size=1k"}
	tmpfs := &configs.Mount{Destination: "/tmp", Device: "tmpfs", Data: "size=1k"}
	c := &configs.Config{Devices: []*devices.Device{fifo, char}, Mounts: []*configs.Mount{bind, tmpfs}}
	warns := relaxConfig(c)
	if fifo.Major != 0 || fifo.Minor != 0 {
		t.Errorf("fifo keeps %d:%d", fifo.Major, fifo.Minor)
	}
	if char.Major != 1 || char.Minor != 3 {
		t.Errorf("char device changed to %d:%d", char.Major, char.Minor)
	}
	if bind.Data != "" || tmpfs.Data != "size=1k" {
		t.Errorf("bind data %q, tmpfs data %q", bind.Data, tmpfs.Data)
	}
	if len(warns) != 1 {
		t.Errorf("warnings %q, want one for the bind", warns)
	}
}

func TestRelaxConfigMountLabel(t *testing.T) {
	c := &configs.Config{MountLabel: "system_u:object_r:svirt_sandbox_file_t:s0:c1,c2"}
	warns := relaxConfig(c)
	if selinux.GetEnabled() {
		if c.MountLabel == "" || len(warns) != 0 {
			t.Errorf("SELinux is enabled: the mount label must be kept (label %q, warnings %q)", c.MountLabel, warns)
		}
		return
	}
	if c.MountLabel != "" || len(warns) != 1 || !strings.Contains(warns[0], "SELinux is not enabled") {
		t.Errorf("no SELinux: label %q, warnings %q; want the label dropped with one warning", c.MountLabel, warns)
	}
}
