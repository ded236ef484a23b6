//go:build linux

package linux

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/systemd"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// cgroupWritable reports whether this process may create a child cgroup
// next to its own for the memory controller (cgroup v1) or in the unified
// hierarchy (v2): the condition for resource limits to be enforceable.
func cgroupWritable() bool {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false
	}
	unified := cgroups.IsCgroup2UnifiedMode()
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir string
		switch {
		case unified && parts[0] == "0" && parts[1] == "":
			dir = filepath.Join("/sys/fs/cgroup", parts[2])
		case !unified && hasController(parts[1], "memory"):
			dir = filepath.Join("/sys/fs/cgroup/memory", parts[2])
		default:
			continue
		}
		return unix.Access(dir, unix.W_OK) == nil
	}
	return false
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// stripResources removes the limits an unprivileged caller without a
// delegated cgroup cannot apply, and says which were dropped.
func stripResources(r *specs.LinuxResources) []string {
	if r == nil {
		return nil
	}
	var dropped []string
	if r.Memory != nil {
		dropped = append(dropped, "memory")
		r.Memory = nil
	}
	if r.CPU != nil {
		dropped = append(dropped, "cpu")
		r.CPU = nil
	}
	if r.Pids != nil {
		dropped = append(dropped, "pids")
		r.Pids = nil
	}
	if r.BlockIO != nil {
		dropped = append(dropped, "blockIO")
		r.BlockIO = nil
	}
	if len(r.HugepageLimits) > 0 {
		dropped = append(dropped, "hugepageLimits")
		r.HugepageLimits = nil
	}
	if r.Network != nil {
		dropped = append(dropped, "network")
		r.Network = nil
	}
	if len(r.Rdma) > 0 {
		dropped = append(dropped, "rdma")
		r.Rdma = nil
	}
	if len(r.Unified) > 0 {
		dropped = append(dropped, "unified")
		r.Unified = nil
	}
	return dropped
}

// checkSystemd fails clearly when the systemd cgroup driver is asked for
// on a host without systemd.
func checkSystemd() error {
	if !systemd.IsRunningSystemd() {
		return fmt.Errorf("--systemd-cgroup: systemd is not running on this host (no /run/systemd/system); use the default cgroupfs driver")
	}
	return nil
}
