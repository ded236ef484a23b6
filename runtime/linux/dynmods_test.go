//go:build linux

package linux

import (
	"strings"
	"testing"
)

// TestFavorDynmods reads the cgroup2 mount's super options: on, off with
// the remount that sets it, or no cgroup2 mount at all.
func TestFavorDynmods(t *testing.T) {
	for _, c := range []struct{ mountinfo, want string }{
		{"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n", "off: the first cgroup migration after idle waits for an RCU grace period (about 10-15 ms per sporadic container start); a host setting: mount -o remount,favordynmods /sys/fs/cgroup/unified"},
		{"30 1 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate,favordynmods,memory_recursiveprot\n", "on (/sys/fs/cgroup)"},
		{"33 31 0:29 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n", "no cgroup2 mount: favordynmods cannot be set here"},
		{"garbage\n", "no cgroup2 mount: favordynmods cannot be set here"},
	} {
		if got := favorDynmods(strings.NewReader(c.mountinfo)); got != c.want {
			t.Errorf("favorDynmods(%q) = %q, want %q", c.mountinfo, got, c.want)
		}
	}
}
