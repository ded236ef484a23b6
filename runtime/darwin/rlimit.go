//go:build darwin || linux

package darwin

import "golang.org/x/sys/unix"

// rlimitResource maps an OCI rlimit name to this system's resource number
// (x/sys/unix has the right numbers for each system: NPROC and MEMLOCK
// differ between Linux and macOS). seatbelt.FromSpec passes only the types
// macOS has.
func rlimitResource(name string) (int, bool) {
	switch name {
	case "RLIMIT_AS":
		return unix.RLIMIT_AS, true
	case "RLIMIT_CORE":
		return unix.RLIMIT_CORE, true
	case "RLIMIT_CPU":
		return unix.RLIMIT_CPU, true
	case "RLIMIT_DATA":
		return unix.RLIMIT_DATA, true
	case "RLIMIT_FSIZE":
		return unix.RLIMIT_FSIZE, true
	case "RLIMIT_MEMLOCK":
		return unix.RLIMIT_MEMLOCK, true
	case "RLIMIT_NOFILE":
		return unix.RLIMIT_NOFILE, true
	case "RLIMIT_NPROC":
		return unix.RLIMIT_NPROC, true
	case "RLIMIT_STACK":
		return unix.RLIMIT_STACK, true
	}
	return 0, false
}
