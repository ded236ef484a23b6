package seatbelt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// FS is the view of the file system path canonicalisation consults. The
// host implementation (HostFS) uses os.Lstat and os.Readlink; tests inject
// a map so results do not depend on the machine running them.
type FS interface {
	// Lstat returns the mode of name without following a final symbolic
	// link; an error satisfying errors.Is(err, fs.ErrNotExist) means the
	// path does not exist (the rest of the path is then kept lexically).
	Lstat(name string) (fs.FileMode, error)
	// Readlink returns the target of the symbolic link name.
	Readlink(name string) (string, error)
}

// HostFS is the FS of the running machine.
type HostFS struct{}

// Lstat implements FS with os.Lstat.
func (HostFS) Lstat(name string) (fs.FileMode, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return 0, err
	}
	return fi.Mode(), nil
}

// Readlink implements FS with os.Readlink.
func (HostFS) Readlink(name string) (string, error) { return os.Readlink(name) }

// darwinLinks are the symbolic links every macOS system has at its root.
// They are applied before the FS is consulted, so a profile generated on
// Linux names the same canonical paths Seatbelt sees on a Mac (Seatbelt
// matches the resolved vnode path: a rule for /tmp never matches).
func darwinLink(p string) (string, bool) {
	switch p {
	case "/tmp":
		return "private/tmp", true
	case "/var":
		return "private/var", true
	case "/etc":
		return "private/etc", true
	}
	return "", false
}

// maxSymlinks bounds symbolic link resolution, like the kernel's MAXSYMLINKS.
const maxSymlinks = 40

// Canonical returns the absolute path p with every symbolic link resolved
// through fsys (and darwin's /tmp, /var and /etc links), "." and ".."
// resolved physically (after the links before them), and no trailing
// slash. Components that do not exist are kept lexically. p must be
// absolute.
func Canonical(fsys FS, p string) (string, error) {
	if fsys == nil {
		fsys = HostFS{}
	}
	if !path.IsAbs(p) {
		return "", fmt.Errorf("canonicalise %q: path is not absolute", p)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("canonicalise %q: path contains a NUL byte", p)
	}
	pending := splitPath(p)
	resolved := "/"
	links := 0
	missing := false
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		if c == ".." {
			resolved = path.Dir(resolved)
			continue
		}
		next := path.Join(resolved, c)
		if missing {
			resolved = next
			continue
		}
		target, isLink := darwinLink(next)
		if !isLink {
			mode, err := fsys.Lstat(next)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				missing = true
				resolved = next
				continue
			case err != nil:
				return "", fmt.Errorf("canonicalise %q: %w", p, err)
			case mode&fs.ModeSymlink == 0:
				resolved = next
				continue
			}
			target, err = fsys.Readlink(next)
			if err != nil {
				return "", fmt.Errorf("canonicalise %q: %w", p, err)
			}
		}
		links++
		if links > maxSymlinks {
			return "", fmt.Errorf("canonicalise %q: too many levels of symbolic links", p)
		}
		if path.IsAbs(target) {
			resolved = "/"
		}
		pending = append(splitPath(target), pending...)
	}
	return resolved, nil
}

// splitPath returns the components of p without empty and "." ones.
func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// ancestors returns the proper ancestors of the canonical path p, "/"
// first: a process that may read p must be able to stat them (getcwd,
// realpath and many runtimes walk up the tree).
func ancestors(p string) []string {
	if p == "/" {
		return nil
	}
	var out []string
	for d := path.Dir(p); ; d = path.Dir(d) {
		out = append(out, d)
		if d == "/" {
			break
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// within reports whether p is dir or below it (both canonical).
func within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}
