//go:build !linux

package skillenv

import (
	"os"
	"path/filepath"
	"syscall"
)

// openBeneath opens rel inside root without following a final symlink
// (environments are built on Linux only; this serves the pure parts).
func openBeneath(root, rel string) (*os.File, error) {
	return os.OpenFile(filepath.Join(root, rel), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}
