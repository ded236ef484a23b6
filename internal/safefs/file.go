package safefs

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to name through a temporary file in the same
// directory, given perm, then renamed over name: a reader, or a process
// killed half-way, sees the old content or the new, never part of it.
// The temporary file is removed on failure. No fsync: the state and
// bundle files the Linux back end and spec write live no longer than
// their containers, and an fsync costs milliseconds on the run path.
func WriteFileAtomic(name string, data []byte, perm fs.FileMode) error {
	return writeFileAtomic(name, data, perm, false)
}

// WriteFileDurable is WriteFileAtomic with the data synced to disk before
// the rename.
func WriteFileDurable(name string, data []byte, perm fs.FileMode) error {
	return writeFileAtomic(name, data, perm, true)
}

func writeFileAtomic(name string, data []byte, perm fs.FileMode, sync bool) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// CopyBeneath copies the regular file rel of the folder root to dst, a
// new file with perm. The source is opened beneath root without following
// symlinks (OpenBeneath) and must be a regular file when open: as root,
// whoever owns root must not be able to swap in a link to a host file
// between a walk of root and the copy.
func CopyBeneath(root, rel, dst string, perm fs.FileMode) error {
	in, err := OpenBeneath(root, rel)
	if err != nil {
		return err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", rel)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
