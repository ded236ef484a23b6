//go:build linux

package hostcheck

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// StageDirEnv names a folder (mode 0755, world-traversable) the suites
// make their stages in; hack/test.sh makes it and removes it on exit, so
// that a test binary killed mid-run leaves nothing behind. Default:
// os.TempDir().
const StageDirEnv = "SKILLRUN_TEST_STAGE_DIR"

// CanExec asks the kernel, as user, whether user can execute path: it
// runs `runuser -u USER -- test -x PATH` on the host. That is what
// decides (every parent folder's search bit, ACLs, mount options), not a
// guess from mode bits. nil when it can.
func CanExec(user, path string) error {
	return asUser(user, "test", "-x", path)
}

// CanRead asks the kernel, as user, whether user can read every file and
// enter every folder of each tree: `runuser -u USER -- find PATH... ( !
// -readable -o -type d ! -executable ) -print -quit` prints the first
// entry it cannot read and fails on a tree it cannot reach at all. nil
// when it can.
func CanRead(user string, paths ...string) error {
	args := append([]string{"find"}, paths...)
	args = append(args, "(", "!", "-readable", "-o", "-type", "d", "!", "-executable", ")", "-print", "-quit")
	return asUser(user, args...)
}

// asUser runs argv as user from the root folder (the test's own working
// directory may be one the user cannot enter) and fails when it fails or
// prints anything.
func asUser(user string, argv ...string) error {
	cmd := exec.Command("runuser", append([]string{"-u", user, "--"}, argv...)...)
	cmd.Dir = "/"
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil && out.Len() == 0 {
		return nil
	}
	msg := strings.TrimSpace(out.String())
	if err != nil {
		msg = strings.TrimSpace(err.Error() + " " + msg)
	} else {
		msg = "not readable: " + msg
	}
	return fmt.Errorf("as %s, `%s` says no: %s", user, strings.Join(argv, " "), msg)
}

// Stage gives the unprivileged test user copies of what it must run or
// read but cannot reach. A checkout in a folder only root can enter (a
// clone under `mktemp -d`, mode 0700) holds the binary under test and
// the example skills behind a closed parent folder, and the rootless
// tests run them as that user. What the user can reach is used where it
// is, never copied. The zero value is ready to use; Remove deletes the
// copies.
type Stage struct {
	mu  sync.Mutex
	top string // the stage folder, made on first copy
	// copies maps what was asked for to what the user reaches: the
	// original (checked once) or its copy.
	copies map[string]string
}

// Exec returns path when user can execute it, else a copy of it (same
// base name: the suites key runtimes and processes on it, mode 0755) in
// the stage folder, checked executable by user in turn, with copies of
// its companion binaries beside it (skillrun execs skillrun-skills and
// skillrun-openshell from its own folder).
func (s *Stage) Exec(user, path string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := user + "\x00x\x00" + path
	if c, ok := s.copies[key]; ok {
		return c, nil
	}
	why := CanExec(user, path)
	if why == nil {
		s.remember(key, path)
		return path, nil
	}
	dir, err := s.newDir()
	if err != nil {
		return "", err
	}
	c := filepath.Join(dir, filepath.Base(path))
	if err := copyFile(path, c, 0o755); err != nil {
		return "", fmt.Errorf("copy %s for %s: %w", path, user, err)
	}
	for _, suffix := range companionSuffixes {
		if fi, err := os.Stat(path + suffix); err == nil && fi.Mode().IsRegular() {
			if err := copyFile(path+suffix, c+suffix, 0o755); err != nil {
				return "", fmt.Errorf("copy %s for %s: %w", path+suffix, user, err)
			}
		}
	}
	if err := CanExec(user, c); err != nil {
		return "", fmt.Errorf("%s cannot execute %s (%v), nor the copy in %s: %w (set %s or TMPDIR to a folder %s can enter)", user, path, why, c, err, StageDirEnv, user)
	}
	s.remember(key, c)
	return c, nil
}

// companionSuffixes name the binaries installed beside a binary under test
// that it execs (skillrun: skillrun-skills, skillrun-openshell).
var companionSuffixes = []string{"-skills", "-openshell"}

// Read returns root when user can read root/rel, for every rel, and
// everything in them; else a stage folder holding a copy of each root/rel
// at the same relative path (folders 0755, files 0644, or 0755 when
// their owner may execute them, symlinks as they are), checked readable
// by user in turn.
func (s *Stage) Read(user, root string, rels ...string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := user + "\x00r\x00" + root + "\x00" + strings.Join(rels, "\x00")
	if c, ok := s.copies[key]; ok {
		return c, nil
	}
	var src []string
	for _, r := range rels {
		src = append(src, filepath.Join(root, r))
	}
	why := CanRead(user, src...)
	if why == nil {
		s.remember(key, root)
		return root, nil
	}
	dir, err := s.newDir()
	if err != nil {
		return "", err
	}
	var dst []string
	for _, r := range rels {
		d := filepath.Join(dir, r)
		if err := mkdirs(dir, filepath.Dir(r)); err != nil {
			return "", err
		}
		if err := copyTree(filepath.Join(root, r), d); err != nil {
			return "", fmt.Errorf("copy %s for %s: %w", filepath.Join(root, r), user, err)
		}
		dst = append(dst, d)
	}
	if err := CanRead(user, dst...); err != nil {
		return "", fmt.Errorf("%s cannot read %v (%v), nor the copies in %s: %w (set %s or TMPDIR to a folder %s can enter)", user, src, why, dir, err, StageDirEnv, user)
	}
	s.remember(key, dir)
	return dir, nil
}

// Dir is the stage folder, "" when nothing was copied.
func (s *Stage) Dir() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.top
}

// Remove deletes every copy.
func (s *Stage) Remove() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.top != "" {
		_ = os.RemoveAll(s.top)
	}
	s.top, s.copies = "", nil
}

func (s *Stage) remember(key, c string) {
	if s.copies == nil {
		s.copies = map[string]string{}
	}
	s.copies[key] = c
}

// newDir makes a fresh 0755 folder for one copy in the stage folder
// (itself made 0755 under $SKILLRUN_TEST_STAGE_DIR or TMPDIR on first
// use).
func (s *Stage) newDir() (string, error) {
	if s.top == "" {
		base := os.Getenv(StageDirEnv)
		if base == "" {
			base = os.TempDir()
		}
		top, err := os.MkdirTemp(base, "skillrun-stage-")
		if err != nil {
			return "", fmt.Errorf("make a stage folder for the test user: %w", err)
		}
		if err := os.Chmod(top, 0o755); err != nil {
			return "", err
		}
		s.top = top
	}
	d, err := os.MkdirTemp(s.top, "c")
	if err != nil {
		return "", err
	}
	return d, os.Chmod(d, 0o755)
}

// mkdirs makes base/rel and every folder between them 0755, whatever the
// umask.
func mkdirs(base, rel string) error {
	p := base
	for _, c := range strings.Split(filepath.Clean(rel), string(filepath.Separator)) {
		if c == "." || c == "" {
			continue
		}
		p = filepath.Join(p, c)
		if err := os.Mkdir(p, 0o755); err != nil && !os.IsExist(err) {
			return err
		}
		if err := os.Chmod(p, 0o755); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, perm os.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst, data, perm); err != nil {
		return err
	}
	return os.Chmod(dst, perm) // whatever the umask
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if err := os.MkdirAll(to, 0o755); err != nil {
				return err
			}
			return os.Chmod(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, to)
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			perm := os.FileMode(0o644)
			if fi.Mode()&0o100 != 0 {
				perm = 0o755
			}
			return copyFile(p, to, perm)
		}
		return nil // sockets, fifos, devices: nothing a skill folder needs
	})
}
