//go:build linux

package runner

import "golang.org/x/sys/unix"

// nprocPerUserNS reports whether the kernel counts RLIMIT_NPROC per user
// namespace (the ucounts rework of Linux 5.14): then a sandbox, which has a
// user namespace of its own, counts only its own tasks.
func nprocPerUserNS() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	return kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 5, 14)
}
