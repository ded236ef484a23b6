package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/internal/safefs"
	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/spec"
)

// Bundle writes the bundle that runs sk with opts (and argv, the
// arguments derived from the input) into dir, which must be empty or
// missing, so that `skillrun run dir` runs the skill. As root, dir is
// handed to the host user the sandbox maps to. dev, when not nil, gives
// the prepared device folder the bundle's /dev binds; without one /dev is
// a tmpfs the runtime that runs the bundle fills. It returns
// the policy; a policy refusal is an error errors.As finds a
// *spec.PolicyError in.
func Bundle(dev runtime.DevDirProvider, dir string, sk *spec.Skill, argv []string, opts Options) (*spec.Policy, error) {
	// The bundle names the environment's folder; it outlives this call
	// (Collect may remove it once unused, like any bundle's host paths).
	p, err := newPlan(context.Background(), sk, argv, opts, nil)
	if err != nil {
		return nil, err
	}
	defer p.release()
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("bundle folder: %w", err)
	}
	if ents, err := os.ReadDir(dir); err != nil {
		return nil, fmt.Errorf("bundle folder: %w", err)
	} else if len(ents) > 0 {
		return nil, &InputError{Err: fmt.Errorf("bundle folder %q is not empty", dir)}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("bundle folder: %w", err)
	}
	if _, err := p.writeBundle(abs, devDirOf(dev), true); err != nil {
		return nil, err
	}
	return p.policy, nil
}

// devDirOf is the prepared device folder of x (a runtime.Runtime or a
// runtime.DevDirProvider), or "".
func devDirOf(x any) string {
	if dp, ok := x.(runtime.DevDirProvider); ok && dp != nil {
		return dp.DevDir()
	}
	return ""
}

// writeBundle generates the spec and writes the bundle into the existing,
// empty folder dir (config.json only when config is set); devDir, when
// set, is bound at /dev. As root it gives dir to the sandbox's host user
// (the sandbox's root must reach rootfs; dir stays 0700) and copies a
// small skill, or one they cannot read, into the rootfs as theirs.
func (p *plan) writeBundle(dir, devDir string, config bool) (*specs.Spec, error) {
	sk := p.sk
	if p.platform == "linux" {
		root := os.Geteuid() == 0
		if root {
			if err := os.Chown(dir, int(p.uid), int(p.gid)); err != nil {
				return nil, fmt.Errorf("bundle folder: %w", err)
			}
		}
		// A small skill is copied into the bundle's rootfs at /skill, read-
		// only with the root and no mount of its own: a bind would name
		// the skill's host path (/home/alice/...) in the sandbox's
		// /proc/self/mountinfo, and the copy also pins the code for the
		// run. A large one is bound in place unless its files are
		// unreadable by the sandbox user (then copied anyway).
		small := sk.Dir != "" && treeWithin(sk.Dir, maxSkillCopyBytes, maxSkillCopyFiles)
		if sk.Dir != "" && (small || (root && !readableBy(sk.Dir, p.uid, p.gid))) {
			owner := [2]int{-1, -1}
			if root {
				owner = [2]int{int(p.uid), int(p.gid)}
			}
			cp := spec.BundleSkillDir(dir)
			if err := copyTree(sk.Dir, cp, owner); err != nil {
				return nil, fmt.Errorf("copy skill %q: %w", sk.Name, err)
			}
			c := *sk
			c.Dir = cp
			sk = &c
		}
	}
	sopts := append(p.sopts[:len(p.sopts):len(p.sopts)], spec.WithBundleDir(dir))
	// The sandbox's /dev is the host's prepared device folder when there
	// is one; else a tmpfs the runtime fills.
	if p.platform == "linux" && devDir != "" {
		sopts = append(sopts, spec.WithDevDir(devDir))
	}
	sp, err := spec.Generate(sk, p.platform, sopts...)
	if err != nil {
		return nil, fmt.Errorf("generate spec for %q: %w", sk.Name, err)
	}
	// A generated spec that breaks the hardened profile is a bug: refuse
	// to run it rather than run it weaker.
	if err := spec.Validate(sp); err != nil {
		return nil, fmt.Errorf("generated spec for %q breaks the sandbox profile: %w", sk.Name, err)
	}
	write := spec.WriteBundleFiles
	if config {
		write = spec.WriteBundle
	}
	if err := write(dir, sp); err != nil {
		return nil, &SkillError{sk.Name, err}
	}
	return sp, nil
}

// readableBy reports whether uid/gid can read every file and search every
// folder of the tree at dir (by permission bits; no ACLs). It stops at the
// first failure.
func readableBy(dir string, uid, gid uint32) bool {
	ok := true
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			ok = false
			return fs.SkipAll
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			ok = false
			return fs.SkipAll
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		need := os.FileMode(0o4)
		if d.IsDir() {
			need = 0o5
		}
		perm := fi.Mode().Perm()
		switch {
		case st != nil && st.Uid == uid:
			perm >>= 6
		case st != nil && st.Gid == gid:
			perm >>= 3
		}
		if perm&need != need {
			ok = false
			return fs.SkipAll
		}
		return nil
	})
	return ok
}

// Skills at most this big are copied into the bundle rather than bound.
const (
	maxSkillCopyBytes = 8 << 20
	maxSkillCopyFiles = 2000
)

// treeWithin reports whether dir holds at most maxBytes of regular files
// and maxFiles entries.
func treeWithin(dir string, maxBytes int64, maxFiles int) bool {
	var size int64
	n := 0
	ok := true
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			ok = false
			return fs.SkipAll
		}
		n++
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				size += fi.Size()
			}
		}
		if n > maxFiles || size > maxBytes {
			ok = false
			return fs.SkipAll
		}
		return nil
	})
	return ok
}

// copyTree copies regular files and folders of src to dst, keeping the
// execute bits, owned by owner (uid, gid; -1 keeps ours). Symlinks are
// skipped: a skill's links cannot point outside the skill in the sandbox
// anyway.
func copyTree(src, dst string, owner [2]int) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if err := safefs.CopyBeneath(src, rel, target, 0o644|fi.Mode().Perm()&0o111); err != nil {
				return err
			}
		default:
			return nil
		}
		if owner[0] < 0 {
			return nil
		}
		return os.Lchown(target, owner[0], owner[1])
	})
}
