//go:build linux

package linux

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
	dir := ownCgroupDir("memory")
	return dir != "" && unix.Access(dir, unix.W_OK) == nil
}

// CgroupLimits implements runtime.CgroupProber: false when the caller is
// unprivileged (rootless cgroups) with neither a writable cgroup of its own
// nor the systemd driver, so that linux.resources limits are dropped.
func (r *Runtime) CgroupLimits() bool {
	return r.systemd || !r.rootlessCgroups || os.Geteuid() == 0 || cgroupWritable()
}

// userScopeAvailable reports whether an unprivileged caller can get a
// delegated cgroup from its systemd instance (the systemd driver, rootless):
// systemd is the host's init, the hierarchy is unified (systemd delegates
// no v1 controllers to users), the user's bus socket exists, and the
// user's manager has the memory and pids controllers. It says why not.
func userScopeAvailable() (bool, string) {
	if !cgroups.IsCgroup2UnifiedMode() {
		return false, "the host does not use the unified cgroup hierarchy (cgroup v2)"
	}
	if !systemd.IsRunningSystemd() {
		return false, "systemd is not running (no /run/systemd/system)"
	}
	bus := os.Getenv("DBUS_SESSION_BUS_ADDRESS")
	if bus == "" {
		xdg := os.Getenv("XDG_RUNTIME_DIR")
		if xdg == "" {
			return false, "XDG_RUNTIME_DIR is not set (no user bus)"
		}
		if fi, err := os.Stat(filepath.Join(xdg, "bus")); err != nil || fi.Mode()&os.ModeSocket == 0 {
			return false, "no user bus at " + filepath.Join(xdg, "bus")
		}
	}
	uid := os.Geteuid()
	ctl, err := os.ReadFile(fmt.Sprintf("/sys/fs/cgroup/user.slice/user-%d.slice/user@%d.service/cgroup.controllers", uid, uid))
	if err != nil {
		return false, fmt.Sprintf("no systemd user manager for uid %d: %v", uid, err)
	}
	have := strings.Fields(string(ctl))
	for _, want := range []string{"memory", "pids"} {
		if !hasController(strings.Join(have, ","), want) {
			return false, fmt.Sprintf("the systemd user manager of uid %d is not delegated the %s controller", uid, want)
		}
	}
	return true, ""
}

// ownCgroupDir is the directory of this process' cgroup: in the unified
// hierarchy on a cgroup v2 host, else in the v1 hierarchy of controller.
// It is "" when /proc/self/cgroup does not say.
func ownCgroupDir(controller string) string {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	unified := cgroups.IsCgroup2UnifiedMode()
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case unified && parts[0] == "0" && parts[1] == "":
			return filepath.Join("/sys/fs/cgroup", parts[2])
		case !unified && hasController(parts[1], controller):
			return filepath.Join("/sys/fs/cgroup", controller, parts[2])
		}
	}
	return ""
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

// prewarmCgroupAttach starts, in the background, a no-op cgroup migration:
// this process' PID written to the cgroup.procs of the cgroup it is
// already in. The first migration into a cgroup pays an RCU grace period
// (the kernel's cgroup_threadgroup_rwsem leaves its fast path), measured at
// 10-16 ms on this kind of host, and libcontainer pays it while the
// container's init waits for its bootstrap data. Paying it here overlaps it
// with loading the config, creating the state and spawning the init;
// migrations that follow within the grace period's window are fast. Moving
// a process into its own cgroup changes nothing else. Errors are ignored:
// the only loss is the overlap.
func prewarmCgroupAttach() {
	dir := ownCgroupDir("pids")
	if dir == "" {
		return
	}
	go func() {
		f, err := os.OpenFile(filepath.Join(dir, "cgroup.procs"), os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		_, _ = f.WriteString(strconv.Itoa(os.Getpid()))
	}()
}
