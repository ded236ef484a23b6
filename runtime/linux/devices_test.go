//go:build linux

package linux

import (
	"os"
	"testing"

	"github.com/moby/sys/userns"
	"github.com/opencontainers/cgroups"
	devices "github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestWantsDeviceOrder(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	spec := func(devs ...specs.LinuxDeviceCgroup) *specs.Spec {
		return &specs.Spec{Linux: &specs.Linux{Resources: &specs.LinuxResources{Devices: devs}}}
	}
	config := func(rootless bool) *configs.Config {
		return &configs.Config{RootlessCgroups: rootless, Cgroups: &cgroups.Cgroup{Resources: &cgroups.Resources{
			Devices: []*devices.Rule{{Type: devices.WildcardDevice, Major: devices.Wildcard, Minor: devices.Wildcard, Permissions: "rwm"}},
		}}}
	}
	denyAll := specs.LinuxDeviceCgroup{Allow: false, Access: "rwm"}
	allowOne := specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: i64(10), Minor: i64(229), Access: "rwm"}
	privileged := os.Geteuid() == 0 && !userns.RunningInUserNS()
	for _, c := range []struct {
		name   string
		spec   *specs.Spec
		config *configs.Config
		want   bool
	}{
		{"no device rules", &specs.Spec{}, config(false), false},
		{"deny all only (runc spec, skills)", spec(denyAll), config(false), false},
		{"an explicit allow", spec(denyAll, allowOne), config(false), privileged},
		{"rootless cgroups", spec(denyAll, allowOne), config(true), false},
		{"no cgroup config", spec(denyAll, allowOne), &configs.Config{}, false},
	} {
		if got := wantsDeviceOrder(c.spec, c.config); got != c.want {
			t.Errorf("%s: wantsDeviceOrder = %v, want %v", c.name, got, c.want)
		}
	}
}
