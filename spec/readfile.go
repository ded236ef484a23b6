package spec

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Size limits of the files Load reads. A skill is untrusted input: a huge
// file must fail fast with an error naming it, not exhaust memory.
const (
	// MaxSkillMDSize bounds SKILL.md (the Agent Skills specification
	// recommends under 500 lines).
	MaxSkillMDSize = 1 << 20
	// MaxManifestSize bounds sandbox.yaml.
	MaxManifestSize = 64 << 10
	// MaxSchemaSize bounds the declared input schema file.
	MaxSchemaSize = 1 << 20
	// MaxEntryScanSize bounds the Python entry point read for argparse
	// inference.
	MaxEntryScanSize = 4 << 20
)

// errNotRegular marks a file that is a FIFO, device, socket or folder.
var errNotRegular = errors.New("not a regular file")

// readSkillFile reads the file rel inside the skill folder dir (absolute
// and symlink-free). The file must resolve inside the folder (a symlink
// to a host file would make skillrun, possibly as root, read and quote it),
// be a regular file (opening a FIFO must never block, a device must never
// be read) and hold at most max bytes. Errors do not name host paths
// beyond rel; os.ErrNotExist is kept for errors.Is.
func readSkillFile(dir, rel string, max int64) ([]byte, error) {
	full := filepath.Join(dir, filepath.FromSlash(rel))
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		return nil, unwrapPath(err)
	}
	if real != dir && !strings.HasPrefix(real, dir+string(filepath.Separator)) {
		return nil, errors.New("resolves outside the skill folder")
	}
	// Never open a device: opening one can have effects (a tape rewinds,
	// a watchdog arms) even before a read.
	if fi, err := os.Stat(real); err != nil {
		return nil, unwrapPath(err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s)", errNotRegular, fileKind(fi.Mode()))
	}
	// O_NONBLOCK: opening a FIFO without a writer returns at once instead
	// of waiting forever; the mode check below then refuses it.
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, unwrapPath(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s)", errNotRegular, fileKind(fi.Mode()))
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%d bytes, larger than the %d-byte limit", fi.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, unwrapPath(err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than the %d-byte limit", max)
	}
	return data, nil
}

// fileKind names a non-regular file type for error messages.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.String()
}
