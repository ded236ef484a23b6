//go:build !linux

package runner

import "golang.org/x/sys/unix"

// openTmpfile reports that this platform has no O_TMPFILE; lockedFile
// falls back to a temporary name.
func openTmpfile(string) (int, error) { return -1, unix.EOPNOTSUPP }
