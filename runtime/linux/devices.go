//go:build linux

package linux

import (
	"fmt"
	"os"

	"github.com/moby/sys/userns"
	"github.com/opencontainers/cgroups"
	devices "github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The runtime-spec says the device cgroup entries are applied in the
// order listed (runtime-tools: linux_cgroups_devices). libcontainer's v1
// devices manager computes the effective rule set and writes a minimal
// transition to it, sorted its own way: the permissions come out right,
// the order the spec names does not (devices.list starts with the
// defaults libcontainer appends). When a spec allows devices explicitly,
// skillrun replays the container's rules in their listed order on the v1
// devices cgroup while the container is still created, before any of its
// code runs: deny everything, then each rule as listed. Replaying the
// rules one by one is exactly the kernel's semantics for them (later
// entries narrow or widen earlier ones), so the permissions are the same;
// only devices.list's order changes. Rootless containers and cgroup v2
// (eBPF) are left to libcontainer.

// wantsDeviceOrder reports whether config lists device cgroup rules that
// allow something beyond libcontainer's defaults: only then does the
// order libcontainer writes differ from the spec's in a visible way.
func wantsDeviceOrder(spec *specs.Spec, config *configs.Config) bool {
	specAllows := false
	if spec.Linux != nil && spec.Linux.Resources != nil {
		for _, d := range spec.Linux.Resources.Devices {
			specAllows = specAllows || d.Allow
		}
	}
	if !specAllows || config.Cgroups == nil || config.Cgroups.Resources == nil || config.RootlessCgroups {
		return false
	}
	// As root inside a user namespace (rootless podman runs runtimes so)
	// libcontainer leaves the devices cgroup alone, and so does skillrun.
	return len(config.Cgroups.Resources.Devices) > 0 && os.Geteuid() == 0 && !userns.RunningInUserNS()
}

// replayDeviceRules writes rules, in order, into the v1 devices cgroup
// folder dir: "a" to devices.deny first, then each rule to devices.allow
// or devices.deny.
func replayDeviceRules(dir string, rules []*devices.Rule) error {
	write := func(file, rule string) error {
		if err := cgroups.WriteFile(dir, file, rule); err != nil {
			return fmt.Errorf("devices cgroup: apply %q in the listed order: %w", rule, err)
		}
		return nil
	}
	if err := write("devices.deny", "a"); err != nil {
		return err
	}
	for _, r := range rules {
		file := "devices.deny"
		if r.Allow {
			file = "devices.allow"
		}
		if err := write(file, r.CgroupString()); err != nil {
			return err
		}
	}
	return nil
}

// replayDevices replays config's device rules on c's v1 devices cgroup,
// when it has one (not with cgroup v2 or without cgroups).
func replayDevices(c *libcontainer.Container, config *configs.Config) error {
	if cgroups.IsCgroup2UnifiedMode() {
		return nil
	}
	st, err := c.State()
	if err != nil {
		return err
	}
	dir := st.CgroupPaths["devices"]
	if dir == "" {
		return nil
	}
	return replayDeviceRules(dir, config.Cgroups.Resources.Devices)
}
