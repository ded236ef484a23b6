//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOwnCgroupDir checks that the directory found for this process holds
// this process.
func TestOwnCgroupDir(t *testing.T) {
	dir := ownCgroupDir("pids")
	if dir == "" {
		t.Skip("no pids cgroup for this process (cgroup v1 without pids, or no /proc/self/cgroup)")
	}
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	me := strconv.Itoa(os.Getpid())
	for _, l := range strings.Fields(string(data)) {
		if l == me {
			return
		}
	}
	t.Fatalf("%s/cgroup.procs does not list this process (%s)", dir, me)
}
