package runtime

import (
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to name through a temporary file in the same
// directory, given perm, then renamed over name: a reader, or a process
// killed half-way, sees the old content or the new, never part of it.
// The temporary file is removed on failure. (No fsync: the state and
// bundle files it writes live no longer than their containers.)
func WriteFileAtomic(name string, data []byte, perm fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
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
