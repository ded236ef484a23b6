//go:build linux

package linux

import (
	"bufio"
	"io"
	"os"
	"strings"
)

// AnnotationFavorDynmods in the features document says whether the
// host's cgroup2 mount has favordynmods: without it the first cgroup
// migration after the machine was idle (every runtime's container start
// makes one) waits for an RCU grace period, 10-15 ms off-CPU measured on
// this project's hosts; the option keeps cgroup's thread-group lock on
// the path that does not wait (Linux 6.0+; a host setting, for every
// hierarchy, v1 controllers included: the lock is global).
const AnnotationFavorDynmods = "run.skillrun.cgroup-favordynmods"

// favorDynmods is AnnotationFavorDynmods' value for the mounts listed in
// mountinfo (the format of /proc/self/mountinfo).
func favorDynmods(mountinfo io.Reader) string {
	sc := bufio.NewScanner(mountinfo)
	var v2 []string
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || g[0] != "cgroup2" {
			continue
		}
		for _, o := range strings.Split(g[2], ",") {
			if o == "favordynmods" {
				return "on (" + f[4] + ")"
			}
		}
		v2 = append(v2, f[4])
	}
	if len(v2) == 0 {
		return "no cgroup2 mount: favordynmods cannot be set here"
	}
	return "off: the first cgroup migration after idle waits for an RCU grace period (about 10-15 ms per sporadic container start); a host setting: mount -o remount,favordynmods " + v2[0]
}

// favorDynmodsSupport is AnnotationFavorDynmods' value for this host.
func favorDynmodsSupport() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "unknown: " + err.Error()
	}
	defer f.Close()
	return favorDynmods(f)
}
