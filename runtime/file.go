package runtime

import (
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
