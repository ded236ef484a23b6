//go:build !linux

package safefs

import (
	"errors"
	"io/fs"
)

// WriteBeneath is Linux's (openat2); workspaces are served on Linux only.
func WriteBeneath(root, rel string, data []byte, perm fs.FileMode, owner [2]int) error {
	return errors.New("write beneath a folder: not supported on this platform")
}
