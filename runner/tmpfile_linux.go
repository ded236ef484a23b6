//go:build linux

package runner

import "golang.org/x/sys/unix"

// openTmpfile opens an unnamed file in dir (O_TMPFILE).
func openTmpfile(dir string) (int, error) {
	return unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
}
