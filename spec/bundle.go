package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/internal/safefs"
	"github.com/skillrun/skillrun/runtime"
)

// WriteBundle writes an OCI bundle for sp into dir (created 0700 if
// missing): config.json (atomically, temp file + rename) and rootfs/
// holding the mount points, the top-level symlinks named by the
// AnnotationSymlinks annotation, and etc/: the files AnnotationEtcGenerate
// names (passwd and group with the one sandbox user, hosts with localhost
// only, nsswitch.conf) plus copies of the secret-free host entries the
// AnnotationEtcCopy annotation names (ld.so.cache, localtime,
// resolv.conf when network is granted). Nothing else of the host's /etc
// is copied. A skill copied for the run goes to BundleSkillDir, its
// caller's business.
func WriteBundle(dir string, sp *specs.Spec) error {
	if err := WriteBundleFiles(dir, sp); err != nil {
		return err
	}
	return WriteConfig(dir, sp)
}

// WriteBundleFiles writes everything of the bundle but config.json: what
// a runtime that is handed the spec in memory needs before it starts.
func WriteBundleFiles(dir string, sp *specs.Spec) error {
	if sp == nil {
		return errors.New("write bundle: nil spec")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write bundle: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("write bundle: %w", err)
	}
	rootfs := "rootfs"
	if sp.Root != nil && sp.Root.Path != "" {
		rootfs = sp.Root.Path
	}
	if !filepath.IsAbs(rootfs) {
		rootfs = filepath.Join(abs, rootfs)
	}
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		return fmt.Errorf("write bundle: rootfs: %w", err)
	}
	symlinks := map[string]bool{}
	if v := sp.Annotations[AnnotationSymlinks]; v != "" {
		for _, kv := range strings.Split(v, ",") {
			name, target, ok := strings.Cut(kv, "=")
			if !ok || name == "" || strings.Contains(name, "/") || target == "" {
				return fmt.Errorf("write bundle: annotation %s: bad entry %q", AnnotationSymlinks, kv)
			}
			symlinks[name] = true
			p := filepath.Join(rootfs, name)
			if cur, err := os.Readlink(p); err == nil && cur == target {
				continue
			}
			if err := os.Symlink(target, p); err != nil {
				return fmt.Errorf("write bundle: rootfs symlink %s: %w", name, err)
			}
		}
	}
	if err := writeGenerated(filepath.Join(rootfs, "etc"), sp); err != nil {
		return err
	}
	if err := copyHostEtc(filepath.Join(rootfs, "etc"), sp.Annotations[AnnotationEtcCopy]); err != nil {
		return err
	}
	if err := makeMountPoints(abs, rootfs, sp, symlinks); err != nil {
		return err
	}
	if sp.Annotations[AnnotationPlatform] == "darwin" {
		if err := os.MkdirAll(filepath.Join(abs, "scratch"), 0o700); err != nil {
			return fmt.Errorf("write bundle: scratch: %w", err)
		}
	}
	return nil
}

// WriteConfig writes sp as dir/config.json, atomically (temp file and
// rename).
func WriteConfig(dir string, sp *specs.Spec) error {
	if sp == nil {
		return errors.New("write bundle: nil spec")
	}
	data, err := json.MarshalIndent(sp, "", "\t")
	if err != nil {
		return fmt.Errorf("write bundle: config.json: %w", err)
	}
	return writeAtomic(filepath.Join(dir, "config.json"), append(data, '\n'), 0o644)
}

// makeMountPoints creates, under rootfs, the directory or empty file each
// mount needs, so that the runtime never has to write into the read-only
// root (it could not as an unmapped user).
func makeMountPoints(bundle, rootfs string, sp *specs.Spec, symlinks map[string]bool) error {
	var dests []string
	for _, m := range sp.Mounts {
		dests = append(dests, path.Clean(m.Destination))
	}
	for _, m := range sp.Mounts {
		d := path.Clean(m.Destination)
		if !path.IsAbs(d) || d == "/" {
			continue
		}
		top := strings.SplitN(d[1:], "/", 2)[0]
		if symlinks[top] {
			continue
		}
		// Mount points inside another mount (/dev/pts in /dev) are the
		// runtime's business.
		nested := false
		for _, o := range dests {
			if o != d && o != "/" && strings.HasPrefix(d, o+"/") {
				nested = true
				break
			}
		}
		if nested {
			continue
		}
		target := filepath.Join(rootfs, filepath.FromSlash(d))
		isFile := false
		if runtime.IsBind(m) {
			src := m.Source
			if !filepath.IsAbs(src) {
				src = filepath.Join(bundle, src)
			}
			if fi, err := os.Stat(src); err == nil && !fi.IsDir() {
				isFile = true
			}
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("write bundle: mount point %s: %w", d, err)
		}
		if isFile {
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return fmt.Errorf("write bundle: mount point %s: %w", d, err)
			}
			f.Close()
			continue
		}
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("write bundle: mount point %s: %w", d, err)
		}
		// Runtimes give a tmpfs the mode of its mount point: make them
		// agree with the mode= option.
		if mode, ok := modeOption(m.Options); ok && m.Type == "tmpfs" {
			if err := os.Chmod(target, mode); err != nil {
				return fmt.Errorf("write bundle: mount point %s: %w", d, err)
			}
		}
	}
	return nil
}

// maxEtcCopy bounds one copied host /etc file (ld.so.cache is ~100 KiB).
const maxEtcCopy = 4 << 20

// copyHostEtc copies the comma-separated host /etc entries into etc:
// symlinks as symlinks, a folder entry by entry (one level: the
// alternatives folder holds symlinks), regular files by content.
func copyHostEtc(etc, list string) error {
	if list == "" {
		return nil
	}
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return fmt.Errorf("write bundle: etc: %w", err)
	}
	for _, src := range strings.Split(list, ",") {
		rel, ok := strings.CutPrefix(path.Clean(src), "/etc/")
		if !ok || rel == "" || strings.Contains(rel, "/") {
			return fmt.Errorf("write bundle: annotation %s: %q is not an entry of /etc", AnnotationEtcCopy, src)
		}
		if err := copyEtcEntry(src, filepath.Join(etc, rel), true); err != nil {
			return fmt.Errorf("write bundle: copy %s: %w", src, err)
		}
	}
	return nil
}

func copyEtcEntry(src, dst string, descend bool) error {
	fi, err := os.Lstat(src)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // gone since the layout was probed: nothing to copy
		}
		return err
	}
	os.RemoveAll(dst)
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		t, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(t, dst)
	case fi.IsDir() && descend:
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		ents, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := copyEtcEntry(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), false); err != nil {
				return err
			}
		}
		return nil
	case fi.Mode().IsRegular():
		if fi.Size() > maxEtcCopy {
			return fmt.Errorf("larger than %d bytes", maxEtcCopy)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	default:
		return nil // devices, sockets, nested folders: not copied
	}
}

// modeOption returns the value of a "mode=" mount option as a FileMode.
func modeOption(opts []string) (os.FileMode, bool) {
	for _, o := range opts {
		if v, ok := strings.CutPrefix(o, "mode="); ok {
			n, err := strconv.ParseUint(v, 8, 32)
			if err != nil {
				return 0, false
			}
			m := os.FileMode(n & 0o777)
			if n&0o1000 != 0 {
				m |= os.ModeSticky
			}
			return m, true
		}
	}
	return 0, false
}

// writeGenerated writes into etc the files the AnnotationEtcGenerate
// annotation names.
func writeGenerated(etc string, sp *specs.Spec) error {
	want := map[string]bool{}
	if v := sp.Annotations[AnnotationEtcGenerate]; v != "" {
		for _, name := range strings.Split(v, ",") {
			want[name] = true
		}
	}
	if len(want) == 0 {
		return nil
	}
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return fmt.Errorf("write bundle: etc: %w", err)
	}
	home, shell := "/tmp", "/usr/sbin/nologin"
	var uid, gid uint32
	if sp.Process != nil {
		uid, gid = sp.Process.User.UID, sp.Process.User.GID
		for _, e := range sp.Process.Env {
			if h, ok := strings.CutPrefix(e, "HOME="); ok {
				home = h
			}
		}
	}
	files := map[string]string{
		"passwd":        fmt.Sprintf("skill:x:%d:%d:skill sandbox user:%s:%s\n", uid, gid, home, shell),
		"group":         fmt.Sprintf("skill:x:%d:\n", gid),
		"hosts":         "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"resolv.conf":   "nameserver 127.0.0.1\noptions attempts:2 timeout:2\n",
		"nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n",
	}
	for name := range want {
		content, ok := files[name]
		if !ok {
			return fmt.Errorf("write bundle: annotation %s: %q is not a file skillrun generates", AnnotationEtcGenerate, name)
		}
		if err := writeAtomic(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeAtomic is safefs.WriteFileAtomic with the file named in its error.
// It does not fsync: bundles are rebuilt, not recovered, after a crash,
// and an fsync costs milliseconds on the run path.
func writeAtomic(name string, data []byte, perm os.FileMode) error {
	if err := safefs.WriteFileAtomic(name, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(name), err)
	}
	return nil
}
