package skillenv

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/internal/safefs"
)

// MarkerFile is written last into a complete environment.
const MarkerFile = ".skillrun-env.json"

// Marker describes a complete environment.
type Marker struct {
	Key     string    `json:"key"`
	Version int       `json:"version"`
	Created time.Time `json:"created"`
	// Digest hashes every path, mode and content of the environment but
	// the marker itself (see Digest).
	Digest string `json:"digest"`
	Files  int    `json:"files"`
	Bytes  int64  `json:"bytes"`
	// PythonName is the venv's base interpreter ("python3.11"), or "".
	PythonName string `json:"python_name,omitempty"`
	// Node says node/node_modules is there.
	Node bool `json:"node,omitempty"`
	// Python and NodePackages list what was installed.
	Python       []string `json:"python,omitempty"`
	NodePackages []string `json:"node_packages,omitempty"`
}

// Cache is an environment cache folder (see the package comment).
type Cache struct {
	// Dir is the cache's root folder.
	Dir string
}

// DefaultDir is the cache folder: /var/lib/skillrun/envs as root, the
// user's cache folder ($XDG_CACHE_HOME or ~/.cache)/skillrun/envs
// otherwise.
func DefaultDir() (string, error) {
	if os.Geteuid() == 0 {
		return "/var/lib/skillrun/envs", nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache folder for environments (set XDG_CACHE_HOME or HOME, or pass --env-cache): %w", err)
	}
	return filepath.Join(d, "skillrun", "envs"), nil
}

// EnvDir is where the environment of key lives once complete.
func (c Cache) EnvDir(key string) string { return filepath.Join(c.Dir, "envs", key) }

func (c Cache) lockPath(key string) string { return filepath.Join(c.Dir, "locks", key) }

func (c Cache) resolvedPath(key, name string) string {
	return filepath.Join(c.Dir, "resolved", key+"."+name)
}

// LogPath is where the last failed build of key left its log.
func (c Cache) LogPath(key string) string { return filepath.Join(c.Dir, "logs", key+".log") }

// init makes the cache's folders. As root the cache is 0755, envs and
// build 0711 (the sandboxes' users traverse them to an environment or a
// staging folder they are given by name), the rest 0700; otherwise 0700.
func (c Cache) init() error {
	root := os.Geteuid() == 0
	mode := os.FileMode(0o700)
	if root {
		mode = 0o755
	}
	if err := os.MkdirAll(c.Dir, mode); err != nil {
		return fmt.Errorf("environment cache %q: %w", c.Dir, err)
	}
	for _, d := range []string{"envs", "locks", "resolved", "logs", "build"} {
		m := mode
		switch {
		case (d == "build" || d == "envs") && root:
			// Reached by name only: a build's random staging folder, an
			// environment's key (the sandboxes' users traverse, never
			// list; a skill's local file: packages are inside).
			m = 0o711
		case d != "envs" && root:
			m = 0o700
		}
		p := filepath.Join(c.Dir, d)
		if err := os.Mkdir(p, m); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("environment cache %q: %w", c.Dir, err)
		}
		// Refuse a cache whose folders someone else controls: they could
		// swap an environment under a run.
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("environment cache %q: %w", c.Dir, err)
		}
		if !fi.IsDir() || owner(fi) != uint32(os.Geteuid()) || fi.Mode().Perm()&0o022 != 0 {
			return fmt.Errorf("environment cache %q: %s must be a folder owned by uid %d and writable by it alone", c.Dir, d, os.Geteuid())
		}
	}
	return nil
}

// lockFile is one key's flock.
type lockFile struct{ f *os.File }

func (c Cache) openLock(key string) (*lockFile, error) {
	f, err := os.OpenFile(c.lockPath(key), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("environment lock: %w", err)
	}
	return &lockFile{f}, nil
}

func (l *lockFile) lock(how int) error {
	for {
		err := unix.Flock(int(l.f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}

func (l *lockFile) close() { l.f.Close() }

// touch records a use (the lock file's mtime; Collect reads it).
func (l *lockFile) touch() {
	now := time.Now()
	_ = os.Chtimes(l.f.Name(), now, now)
}

// readMarker returns the marker of a complete environment of key, or an
// error saying why it is not one.
func (c Cache) readMarker(key string) (*Marker, error) {
	b, err := os.ReadFile(filepath.Join(c.EnvDir(key), MarkerFile))
	if err != nil {
		return nil, err
	}
	var m Marker
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("marker: %w", err)
	}
	if m.Key != key || m.Version != keyVersion || m.Digest == "" {
		return nil, errors.New("marker does not match its key")
	}
	return &m, nil
}

// Verify recomputes the digest of key's environment and compares it with
// its marker's.
func (c Cache) Verify(key string) (*Marker, error) {
	m, err := c.readMarker(key)
	if err != nil {
		return nil, err
	}
	d, files, size, err := Digest(c.EnvDir(key))
	if err != nil {
		return nil, err
	}
	if d != m.Digest || files != m.Files || size != m.Bytes {
		return nil, fmt.Errorf("content changed since it was built (digest %s..., marker says %s...)", d[:12], m.Digest[:12])
	}
	return m, nil
}

// Digest hashes the tree at root: every path (sorted), its type and
// permission bits, and a file's content or a symlink's target; the
// top-level marker is left out. It also counts files and bytes. Symlinks
// are never followed; any other kind of file is an error.
func Digest(root string) (string, int, int64, error) {
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// The marker and the top folder's own mode (it is sealed after
		// the rename into place) are not content.
		if p == filepath.Join(root, MarkerFile) || p == root {
			return nil
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return "", 0, 0, err
	}
	sort.Strings(paths)
	h := sha256.New()
	files, size := 0, int64(0)
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", 0, 0, err
		}
		rel, _ := filepath.Rel(root, p)
		m := fi.Mode()
		fmt.Fprintf(h, "%s\x00%s\x00", rel, m.Type()|m.Perm())
		switch {
		case m.IsRegular():
			files++
			size += fi.Size()
			f, err := safefs.OpenBeneath(root, rel)
			if err != nil {
				return "", 0, 0, err
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return "", 0, 0, err
			}
		case m&os.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return "", 0, 0, err
			}
			io.WriteString(h, t)
		case m.IsDir():
		default:
			return "", 0, 0, fmt.Errorf("%s is %s, not a file, folder or symlink", rel, m.Type())
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), files, size, nil
}

// seal checks a built tree and makes it the cache owner's and read-only:
// regular files (0444, 0555 when executable; setuid/setgid/sticky bits
// dropped), folders (0555) and symlinks only. The top folder keeps its
// write bit until it has been renamed into place (see install).
//
// As root the tree belonged to the build's sandbox user until now: the
// top folder is taken first (root, 0700) so that no process of that user
// can reach in any more, and every file is changed through a descriptor
// opened without following symlinks, never by path.
func seal(root string) error {
	uid, gid := os.Geteuid(), os.Getegid()
	if err := os.Lchown(root, uid, gid); err != nil {
		return err
	}
	if err := os.Chmod(root, 0o700); err != nil {
		return err
	}
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if p == root {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		m := fi.Mode()
		switch {
		case m&os.ModeSymlink != 0:
			return os.Lchown(p, uid, gid)
		case m.IsDir():
			dirs = append(dirs, rel)
			// Readable while walking; sealed after.
			return fixMode(root, rel, uid, gid, 0o755)
		case m.IsRegular():
			perm := os.FileMode(0o444)
			if m.Perm()&0o111 != 0 {
				perm = 0o555
			}
			return fixMode(root, rel, uid, gid, perm)
		default:
			return fmt.Errorf("the build made %s, %s: only files, folders and symlinks are kept", rel, m.Type())
		}
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := fixMode(root, dirs[i], uid, gid, 0o555); err != nil {
			return err
		}
	}
	return os.Chmod(root, 0o755)
}

// fixMode sets the owner and mode of root/rel through a descriptor
// (safefs.OpenBeneath). A file its owner cannot open (a non-root cache, mode
// 0000) is changed by path: only the caller's own files are there.
func fixMode(root, rel string, uid, gid int, perm os.FileMode) error {
	f, err := safefs.OpenBeneath(root, rel)
	if err != nil {
		if os.Geteuid() != 0 && errors.Is(err, os.ErrPermission) {
			p := filepath.Join(root, rel)
			if err := os.Lchown(p, uid, gid); err != nil {
				return err
			}
			return os.Chmod(p, perm)
		}
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		return fmt.Errorf("%s changed while it was sealed", rel)
	}
	if err := f.Chown(uid, gid); err != nil {
		return err
	}
	return f.Chmod(perm)
}

// install seals staging, writes its marker and renames it to key's
// place, replacing a broken environment there.
func (c Cache) install(staging string, m *Marker) error {
	if err := seal(staging); err != nil {
		return err
	}
	d, files, size, err := Digest(staging)
	if err != nil {
		return err
	}
	m.Digest, m.Files, m.Bytes, m.Version, m.Created = d, files, size, keyVersion, time.Now().UTC()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(staging, MarkerFile), append(b, '\n'), 0o444); err != nil {
		return err
	}
	dst := c.EnvDir(m.Key)
	if _, err := os.Lstat(dst); err == nil {
		// Moving a folder to another parent rewrites its "..": it must
		// be writable.
		_ = os.Chmod(dst, 0o755)
		old := staging + ".old"
		if err := os.Rename(dst, old); err != nil {
			return err
		}
		defer removeTree(old)
	}
	if err := os.Rename(staging, dst); err != nil {
		return err
	}
	return os.Chmod(dst, 0o555)
}

// removeTree removes a sealed tree (its folders are read-only).
func removeTree(root string) error {
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(root)
}

// owner is a file's uid.
func owner(fi os.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return ^uint32(0)
}

// Collected is what Collect removed or kept.
type Collected struct {
	Removed []string `json:"removed"`
	InUse   []string `json:"in_use,omitempty"`
	Kept    []string `json:"kept,omitempty"`
	Bytes   int64    `json:"bytes_freed"`
}

// Collect removes environments not used for maxAge (a run's use is the
// last time its key was acquired) and not named in keep, never one in use
// (its lock held by a run or a build), and the staging folders of builds
// that died.
func (c Cache) Collect(maxAge time.Duration, keep map[string]bool) (*Collected, error) {
	out := &Collected{}
	if err := c.init(); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(filepath.Join(c.Dir, "envs"))
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		key := e.Name()
		if keep[key] {
			out.Kept = append(out.Kept, key)
			continue
		}
		l, err := c.openLock(key)
		if err != nil {
			return out, err
		}
		if err := l.lock(unix.LOCK_EX | unix.LOCK_NB); err != nil {
			l.close()
			out.InUse = append(out.InUse, key)
			continue
		}
		fi, err := l.f.Stat()
		if err == nil && time.Since(fi.ModTime()) < maxAge {
			l.close()
			out.Kept = append(out.Kept, key)
			continue
		}
		if m, err := c.readMarker(key); err == nil {
			out.Bytes += m.Bytes
		}
		err = removeTree(c.EnvDir(key))
		if err == nil {
			_ = os.Remove(c.lockPath(key))
			out.Removed = append(out.Removed, key)
		}
		l.close()
		if err != nil {
			return out, err
		}
	}
	// Staging folders whose build is gone (its key's lock is free).
	builds, _ := os.ReadDir(filepath.Join(c.Dir, "build"))
	for _, b := range builds {
		key, _, _ := strings.Cut(b.Name(), "-")
		l, err := c.openLock(key)
		if err != nil {
			continue
		}
		if l.lock(unix.LOCK_EX|unix.LOCK_NB) == nil {
			_ = removeTree(filepath.Join(c.Dir, "build", b.Name()))
		}
		l.close()
	}
	return out, nil
}
