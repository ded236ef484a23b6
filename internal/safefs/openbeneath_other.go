//go:build !linux

package safefs

import (
	"os"
	"path/filepath"
	"syscall"
)

// OpenBeneath opens rel inside root without following a final symlink
// (environments are built on Linux only; this serves the pure parts).
func OpenBeneath(root, rel string) (*os.File, error) {
	return os.OpenFile(filepath.Join(root, rel), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}
