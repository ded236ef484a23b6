// Package rootfs builds the busybox root file systems the black-box
// suites run their containers in, and clones them cheaply.
package rootfs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNoBusybox means the host has no static busybox to build from
// (package busybox-static, hack/install-deps.sh test).
var ErrNoBusybox = errors.New("no static busybox on this host (install busybox-static: hack/install-deps.sh test)")

// Busybox writes a minimal root file system into dir from the host's
// static busybox: the usual mount points (/tmp sticky and world-writable),
// bin/busybox with a relative symlink per applet (`busybox --install -s`
// would point at the host path), and the files of etc (paths relative to
// dir, e.g. "etc/passwd"; a value "-> TARGET" makes a symlink).
func Busybox(dir string, etc map[string]string) error {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoBusybox, err)
	}
	if out, err := exec.Command("file", "-L", bb).Output(); err == nil && !strings.Contains(string(out), "statically linked") {
		return fmt.Errorf("%w: %s is not statically linked", ErrNoBusybox, bb)
	}
	for _, d := range []string{"bin", "proc", "dev", "sys", "tmp", "etc", "root", "run", "var/tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(dir, "tmp"), 0o1777); err != nil {
		return err
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "busybox"), data, 0o755); err != nil {
		return err
	}
	list, err := exec.Command(bb, "--list").Output()
	if err != nil {
		return fmt.Errorf("busybox --list: %w", err)
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet == "busybox" {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", applet)); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	for name, content := range etc {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if target, ok := strings.CutPrefix(content, "-> "); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Clone copies the tree template to dir: folders with their mode (sticky
// bit included), symlinks as symlinks, files hard-linked (copied when a
// link is not possible, e.g. across file systems).
func Clone(template, dir string) error {
	return filepath.WalkDir(template, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(template, p)
		dst := filepath.Join(dir, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			return os.Chmod(dst, info.Mode().Perm()|info.Mode()&os.ModeSticky)
		case info.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, dst)
		default:
			if err := os.Link(p, dst); err == nil {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, data, info.Mode().Perm())
		}
	})
}
