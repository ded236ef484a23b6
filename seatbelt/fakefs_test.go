package seatbelt

import (
	"fmt"
	"io/fs"
)

// fakeFS is a deterministic FS: a map from absolute path to entry. Parent
// directories are implied.
type fakeFS map[string]fakeEntry

type fakeEntry struct {
	mode   fs.FileMode
	target string // for symbolic links
}

func dir() fakeEntry                  { return fakeEntry{mode: fs.ModeDir | 0o755} }
func file(perm fs.FileMode) fakeEntry { return fakeEntry{mode: perm} }
func link(target string) fakeEntry    { return fakeEntry{mode: fs.ModeSymlink | 0o777, target: target} }

func (f fakeFS) Lstat(name string) (fs.FileMode, error) {
	if e, ok := f[name]; ok {
		return e.mode, nil
	}
	for p := range f {
		if within(p, name) && p != name {
			return fs.ModeDir | 0o755, nil
		}
	}
	return 0, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrNotExist}
}

func (f fakeFS) Readlink(name string) (string, error) {
	e, ok := f[name]
	if !ok || e.mode&fs.ModeSymlink == 0 {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fmt.Errorf("not a symbolic link")}
	}
	return e.target, nil
}

// macFS is a small macOS-like tree.
func macFS() fakeFS {
	return fakeFS{
		"/usr/bin/python3":                             file(0o755),
		"/usr/bin/env":                                 file(0o755),
		"/bin/sh":                                      file(0o755),
		"/bin/README":                                  file(0o644),
		"/private/tmp":                                 dir(),
		"/private/var/folders/xy/T":                    dir(),
		"/Users/alice/skills/pdf/main.py":              file(0o644),
		"/Users/alice/skills/pdf/run.sh":               file(0o755),
		"/Users/alice/bundle/rootfs":                   dir(),
		"/Users/alice/bundle/config.json":              file(0o644),
		"/Users/alice/data":                            dir(),
		"/Users/alice/current":                         link("skills/pdf"),
		"/Users/alice/abs":                             link("/Users/alice/skills"),
		"/Users/alice/loop":                            link("/Users/alice/loop"),
		"/Users/alice/up":                              link(".."),
		"/Users/alice/tmplink":                         link("/tmp/work"),
		"/opt/homebrew/bin/python3":                    link("../Cellar/python/3.12/bin/python3"),
		"/opt/homebrew/Cellar/python/3.12":             dir(),
		"/opt/homebrew/Cellar/python/3.12/bin/python3": file(0o755),
	}
}
