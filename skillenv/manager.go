package skillenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/internal/safefs"
	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/spec"
)

// Build limits (the operator's --build-timeout overrides the time).
const (
	DefaultBuildTimeout = 10 * time.Minute
	buildMemory         = 2 << 30
	buildScratch        = 2 << 30
	buildPids           = 1024
	buildOutput         = 1 << 20
	// buildUser is the host user a build runs as when skillrun is root.
	buildUser = 65534
)

// ErrNotPrepared is returned by Acquire when the environment is missing
// and the manager may not build it.
var ErrNotPrepared = errors.New("environment not prepared")

// Manager prepares skills' environments in a Cache and hands them to runs
// (it implements runner.DepsProvider). It holds no global state; one value
// may serve concurrent runs.
type Manager struct {
	Cache Cache
	// Runtime runs the builds.
	Runtime runtime.Runtime
	// Index is the operator's package index configuration.
	Index Index
	// Policy is the install policy (and part of every key).
	Policy Policy
	// Build, when true, lets Acquire build a missing environment;
	// otherwise it fails with ErrNotPrepared.
	Build bool
	// BuildTimeout bounds one build (default DefaultBuildTimeout).
	BuildTimeout time.Duration
	// TempDir is where build bundles are made (runner.Options.TempDir).
	TempDir string
	// Progress, when set, is told what a build is doing ("" when done).
	Progress func(msg string)
	// lookup resolves index hosts (tests replace it).
	lookup func(context.Context, string) ([]netip.Addr, error)
}

// Acquire implements runner.DepsProvider: it returns sk's ready
// environment, building it first when it is missing or incomplete and the
// manager may. The environment stays in use (Collect leaves it) until
// release is called.
func (m *Manager) Acquire(ctx context.Context, sk *spec.Skill) (*spec.DepsEnv, *runner.EnvInfo, func(), error) {
	plan, err := PlanFor(sk, m.Policy)
	if err != nil {
		return nil, nil, nil, err
	}
	if plan == nil {
		return nil, nil, func() {}, nil
	}
	if err := m.Cache.init(); err != nil {
		return nil, nil, nil, err
	}
	l, err := m.Cache.openLock(plan.Key)
	if err != nil {
		return nil, nil, nil, err
	}
	release := func() { l.close() }
	info := &runner.EnvInfo{Key: plan.Key}
	for attempt := 0; ; attempt++ {
		if err := l.lock(unix.LOCK_SH); err != nil {
			release()
			return nil, nil, nil, fmt.Errorf("environment lock: %w", err)
		}
		if mk, err := m.Cache.readMarker(plan.Key); err == nil {
			l.touch()
			info.Python, info.Node = mk.Python, mk.NodePackages
			return depsEnv(m.Cache.EnvDir(plan.Key), mk), info, release, nil
		}
		if attempt > 0 || !m.Build {
			release()
			if !m.Build {
				return nil, nil, nil, fmt.Errorf("%w (key %s): run `skillrun skill prepare %s` first", ErrNotPrepared, plan.Key[:12], sk.Dir)
			}
			return nil, nil, nil, errors.New("environment vanished after it was built")
		}
		// Build under the exclusive lock, then take the shared one again.
		if err := l.lock(unix.LOCK_EX); err != nil {
			release()
			return nil, nil, nil, fmt.Errorf("environment lock: %w", err)
		}
		rep, err := m.buildLocked(ctx, sk, plan, false)
		if err != nil {
			release()
			return nil, nil, nil, err
		}
		if rep.Status == StatusBuilt {
			info.Built, info.BuildMS, info.Build = true, rep.BuildMS, rep.Build
		}
	}
}

func depsEnv(dir string, mk *Marker) *spec.DepsEnv {
	return &spec.DepsEnv{Dir: dir, Python: mk.PythonName, Node: mk.Node}
}

// Statuses of a Report.
const (
	// StatusReady: the environment was there and complete.
	StatusReady = "ready"
	// StatusBuilt: it was built now.
	StatusBuilt = "built"
	// StatusNone: the skill declares no dependencies.
	StatusNone = "none"
)

// Report is what Prepare did for one skill.
type Report struct {
	Skill  string `json:"skill"`
	Status string `json:"status"`
	Key    string `json:"key,omitempty"`
	Dir    string `json:"dir,omitempty"`
	// Verified is true when every file was hashed and matched the marker.
	Verified bool `json:"verified,omitempty"`
	// Rebuilt says why an existing entry was replaced.
	Rebuilt string   `json:"rebuilt,omitempty"`
	Python  []string `json:"python,omitempty"`
	Node    []string `json:"node,omitempty"`
	BuildMS int64    `json:"build_ms,omitempty"`
	// Build is the build sandbox's result (network report, usage).
	Build *runner.Result `json:"build,omitempty"`
}

// Prepare makes sure sk's environment is complete: with verify, every file
// is hashed against the marker and a mismatch is rebuilt; with force, it
// is rebuilt anyway.
func (m *Manager) Prepare(ctx context.Context, sk *spec.Skill, verify, force bool) (*Report, error) {
	plan, err := PlanFor(sk, m.Policy)
	if err != nil {
		return nil, err
	}
	if plan == nil {
		return &Report{Skill: sk.Name, Status: StatusNone}, nil
	}
	if err := m.Cache.init(); err != nil {
		return nil, err
	}
	l, err := m.Cache.openLock(plan.Key)
	if err != nil {
		return nil, err
	}
	defer l.close()
	if err := l.lock(unix.LOCK_EX); err != nil {
		return nil, fmt.Errorf("environment lock: %w", err)
	}
	var why string
	if !force {
		var mk *Marker
		if verify {
			mk, err = m.Cache.Verify(plan.Key)
		} else {
			mk, err = m.Cache.readMarker(plan.Key)
		}
		if err == nil {
			l.touch()
			return &Report{Skill: sk.Name, Status: StatusReady, Key: plan.Key, Dir: m.Cache.EnvDir(plan.Key),
				Verified: verify, Python: mk.Python, Node: mk.NodePackages}, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			why = err.Error()
		}
	} else {
		why = "forced"
	}
	rep, err := m.buildLocked(ctx, sk, plan, true)
	if err != nil {
		return nil, err
	}
	rep.Rebuilt = why
	return rep, nil
}

// buildLocked builds plan's environment; the caller holds the key's
// exclusive lock. Unless force, an environment completed meanwhile (by
// another builder) is taken as it is.
func (m *Manager) buildLocked(ctx context.Context, sk *spec.Skill, plan *Plan, force bool) (*Report, error) {
	if !force {
		if mk, err := m.Cache.readMarker(plan.Key); err == nil {
			return &Report{Skill: sk.Name, Status: StatusReady, Key: plan.Key, Dir: m.Cache.EnvDir(plan.Key), Python: mk.Python, Node: mk.NodePackages}, nil
		}
	}
	start := time.Now()
	if m.Progress != nil {
		m.Progress(fmt.Sprintf("preparing the dependencies of %s", sk.Name))
		defer m.Progress("")
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	staging := filepath.Join(m.Cache.Dir, "build", plan.Key+"-"+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(staging, 0o700); err != nil {
		return nil, fmt.Errorf("build folder: %w", err)
	}
	keep := false
	defer func() {
		if !keep {
			_ = removeTree(staging)
		}
	}()
	mk := &Marker{Key: plan.Key}
	script, env, opts, err := m.stage(ctx, sk, plan, staging, mk)
	if err != nil {
		return nil, err
	}
	// As root the build runs as nobody, whoever owns the skill: an
	// environment is shared by every skill with the same declaration, and
	// the owner's own host processes could otherwise reach into the
	// staging folder while the build runs (the sandbox maps to the
	// workspace's owner, and must own what it writes).
	if os.Geteuid() == 0 {
		if err := chownTree(staging, buildUser, buildUser); err != nil {
			return nil, fmt.Errorf("build folder: %w", err)
		}
	}
	opts.Workspace = staging
	opts.Command = []string{"/bin/sh", "-c", script}
	opts.CommandEnv = env
	timeout := m.BuildTimeout
	if timeout <= 0 {
		timeout = DefaultBuildTimeout
	}
	opts.Timeout = timeout
	opts.Memory, opts.Scratch, opts.Pids, opts.OutputLimit = buildMemory, buildScratch, buildPids, buildOutput
	opts.CPUs = float64(max(1, goruntime.NumCPU()))
	opts.TempDir = m.TempDir
	res, err := runner.Run(ctx, m.Runtime, sk, nil, opts)
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	res.Warnings = nil // the build's own grants, not the skill's
	res.Output = nil
	if !res.OK {
		msg := res.Error
		if msg == "" {
			msg = fmt.Sprintf("exit status %d", res.ExitCode)
		}
		logTail := m.keepLog(plan.Key, filepath.Join(staging, "build.log"))
		return nil, fmt.Errorf("build failed (%s): %s (log: %s)", msg, logTail, m.Cache.LogPath(plan.Key))
	}
	if err := m.collect(plan, staging, mk); err != nil {
		m.keepLog(plan.Key, filepath.Join(staging, "build.log"))
		return nil, err
	}
	if err := m.Cache.install(staging, mk); err != nil {
		return nil, fmt.Errorf("install environment: %w", err)
	}
	keep = true
	_ = os.Remove(m.Cache.LogPath(plan.Key))
	return &Report{Skill: sk.Name, Status: StatusBuilt, Key: plan.Key, Dir: m.Cache.EnvDir(plan.Key),
		Python: mk.Python, Node: mk.NodePackages, BuildMS: time.Since(start).Milliseconds(), Build: res}, nil
}

// stage writes the build's inputs into staging and returns the build
// script, its environment and the run options granting the indexes.
func (m *Manager) stage(ctx context.Context, sk *spec.Skill, plan *Plan, staging string, mk *Marker) (string, map[string]string, runner.Options, error) {
	var opts runner.Options
	lookup := m.lookup
	if lookup == nil {
		lookup = lookupHost
	}
	env := map[string]string{}
	script := []string{"set -eu", "exec >>/workspace/build.log 2>&1"}
	// grant gives the build network access to an index (raw, or def when
	// unset; synthetic names one given by address).
	grant := func(raw, def, synthetic string) (*indexAccess, error) {
		if raw == "" {
			raw = def
		}
		a, err := access(ctx, raw, synthetic, lookup)
		if err != nil {
			return nil, err
		}
		opts.AllowHosts = append(opts.AllowHosts, a.Allow)
		if a.Resolve != "" {
			opts.Resolve = append(opts.Resolve, a.Resolve)
		}
		return a, nil
	}
	if py := plan.Python; py != nil {
		a, err := grant(m.Index.PipIndexURL, DefaultPipIndex, "pypi.index.skillrun.internal")
		if err != nil {
			return "", nil, opts, err
		}
		site := filepath.Join("python", "lib", py.Name, "site-packages")
		if err := os.MkdirAll(filepath.Join(staging, site), 0o755); err != nil {
			return "", nil, opts, err
		}
		if err := os.MkdirAll(filepath.Join(staging, "python", "bin"), 0o755); err != nil {
			return "", nil, opts, err
		}
		// A venv by hand: bin/python3 is the base interpreter (the
		// sandbox's /usr is the host's), pyvenv.cfg makes Python take
		// lib/pythonX.Y/site-packages as its site folder, system
		// site-packages excluded.
		if err := os.Symlink(py.Interpreter.Path, filepath.Join(staging, "python", "bin", "python3")); err != nil {
			return "", nil, opts, err
		}
		cfg := fmt.Sprintf("home = %s\ninclude-system-site-packages = false\nversion = %s\n",
			filepath.Dir(py.Interpreter.Path), strings.TrimPrefix(py.Name, "python"))
		if err := os.WriteFile(filepath.Join(staging, "python", "pyvenv.cfg"), []byte(cfg), 0o644); err != nil {
			return "", nil, opts, err
		}
		lock := py.Deps.Lock
		if lock == nil {
			lock = m.resolvedLines(plan.Key, "requirements.lock")
		}
		args := []string{py.Interpreter.Path, "-s", "-E", "-m", "pip", "install", "--isolated", "--no-input",
			"--disable-pip-version-check", "--no-cache-dir", "--no-warn-script-location", "--progress-bar", "off",
			"--target", "/workspace/" + site, "--report", "/workspace/pip-report.json", "--index-url", a.URL}
		if a.Insecure != "" {
			args = append(args, "--trusted-host", a.Insecure)
		}
		if m.Index.PipCert != "" {
			p, err := stageCA(staging, m.Index.PipCert, "pip-ca.pem")
			if err != nil {
				return "", nil, opts, err
			}
			args = append(args, "--cert", p)
		}
		if m.Policy.SourceBuilds {
			// Source builds use the interpreter's own setuptools (no
			// build isolation: that would fetch build tools).
			args = append(args, "--no-build-isolation")
		} else {
			args = append(args, "--only-binary", ":all:")
		}
		if lock != nil {
			if err := os.WriteFile(filepath.Join(staging, "requirements.lock"), []byte(strings.Join(lock, "\n")+"\n"), 0o644); err != nil {
				return "", nil, opts, err
			}
			args = append(args, "--require-hashes", "--no-deps", "-r", "/workspace/requirements.lock")
		} else {
			if err := os.WriteFile(filepath.Join(staging, "requirements.txt"), []byte(strings.Join(py.Deps.Requirements, "\n")+"\n"), 0o644); err != nil {
				return "", nil, opts, err
			}
			args = append(args, "-r", "/workspace/requirements.txt")
		}
		script = append(script, "echo '== pip install'", shellJoin(args))
		mk.PythonName = py.Name
	}
	if nd := plan.Node; nd != nil {
		a, err := grant(m.Index.NpmRegistry, DefaultNpmRegistry, "npm.index.skillrun.internal")
		if err != nil {
			return "", nil, opts, err
		}
		nodeDir := filepath.Join(staging, "node")
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			return "", nil, opts, err
		}
		if err := os.WriteFile(filepath.Join(nodeDir, "package.json"), nd.Deps.PackageJSON(), 0o644); err != nil {
			return "", nil, opts, err
		}
		for _, rel := range nd.Deps.LocalFiles {
			if err := copyPath(nd.Dir, rel, nodeDir); err != nil {
				return "", nil, opts, fmt.Errorf("node: %s: %w", rel, err)
			}
		}
		lock := []byte(nd.Deps.Lock)
		if lock == nil {
			lock, _ = os.ReadFile(m.Cache.resolvedPath(plan.Key, "package-lock.json"))
		}
		verb := "install"
		if len(lock) > 0 {
			if err := os.WriteFile(filepath.Join(nodeDir, "package-lock.json"), lock, 0o644); err != nil {
				return "", nil, opts, err
			}
			verb = "ci"
		}
		args := []string{"npm", verb, "--omit=dev", "--no-audit", "--no-fund", "--no-update-notifier",
			"--registry", a.URL, "--cache", "/tmp/.npm", "--loglevel", "warn"}
		if !m.Policy.InstallScripts {
			args = append(args, "--ignore-scripts")
		}
		script = append(script, "echo '== npm "+verb+"'", "cd /workspace/node", shellJoin(args),
			// An environment without any package still has the folder.
			"mkdir -p /workspace/node/node_modules")
		if m.Index.NpmCAFile != "" {
			p, err := stageCA(staging, m.Index.NpmCAFile, "npm-ca.pem")
			if err != nil {
				return "", nil, opts, err
			}
			env["NODE_EXTRA_CA_CERTS"] = p
		}
		env["npm_config_userconfig"] = "/tmp/.npmrc-user-none"
		env["npm_config_globalconfig"] = "/tmp/.npmrc-global-none"
		mk.Node = true
	}
	// The build's own inputs are not part of the environment.
	script = append(script, "rm -rf /workspace/.build", "echo '== done'")
	return strings.Join(script, "\n"), env, opts, nil
}

// stageCA copies an operator's CA bundle into the build's inputs and
// returns its path in the sandbox.
func stageCA(staging, host, name string) (string, error) {
	b, err := os.ReadFile(host)
	if err != nil {
		return "", fmt.Errorf("CA bundle: %w", err)
	}
	dir := filepath.Join(staging, ".build")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		return "", err
	}
	return "/workspace/.build/" + name, nil
}

// collect reads what the build installed into the marker and saves the
// resolved locks for later builds of the same key.
func (m *Manager) collect(plan *Plan, staging string, mk *Marker) error {
	if plan.Python != nil {
		b, err := os.ReadFile(filepath.Join(staging, "pip-report.json"))
		if err != nil {
			return fmt.Errorf("pip left no report: %w", err)
		}
		pkgs, lock, err := parsePipReport(b)
		if err != nil {
			return err
		}
		mk.Python = pkgs
		if plan.Python.Deps.Lock == nil {
			text := strings.Join(lock, "\n") + "\n"
			if err := os.WriteFile(filepath.Join(staging, "requirements.lock"), []byte(text), 0o644); err != nil {
				return err
			}
			if err := safefs.WriteFileAtomic(m.Cache.resolvedPath(plan.Key, "requirements.lock"), []byte(text), 0o600); err != nil {
				return err
			}
		}
	}
	if plan.Node != nil {
		b, err := os.ReadFile(filepath.Join(staging, "node", "package-lock.json"))
		if err != nil {
			return fmt.Errorf("npm left no package-lock.json: %w", err)
		}
		pkgs, err := parseNpmLock(b)
		if err != nil {
			return err
		}
		mk.NodePackages = pkgs
		if plan.Node.Deps.Lock == nil {
			if err := safefs.WriteFileAtomic(m.Cache.resolvedPath(plan.Key, "package-lock.json"), b, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolvedLines reads a lock the first build of key resolved, or nil.
func (m *Manager) resolvedLines(key, name string) []string {
	b, err := os.ReadFile(m.Cache.resolvedPath(key, name))
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// keepLog copies a failed build's log into the cache's logs folder and
// returns its last line.
func (m *Manager) keepLog(key, log string) string {
	b, err := os.ReadFile(log)
	if err != nil {
		return "no build log"
	}
	_ = safefs.WriteFileAtomic(m.Cache.LogPath(key), b, 0o600)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "== ") {
			return l
		}
	}
	return "empty build log"
}

// parsePipReport reads pip's installation report (pip install --report):
// the installed distributions as name==version, and lock lines pinning
// each with the sha256 of what was downloaded.
func parsePipReport(b []byte) ([]string, []string, error) {
	var rep struct {
		Install []struct {
			DownloadInfo struct {
				URL         string `json:"url"`
				ArchiveInfo struct {
					Hash   string            `json:"hash"`
					Hashes map[string]string `json:"hashes"`
				} `json:"archive_info"`
			} `json:"download_info"`
			Metadata struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"metadata"`
		} `json:"install"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, nil, fmt.Errorf("pip report: %w", err)
	}
	var pkgs, lock []string
	for _, in := range rep.Install {
		name, ver := in.Metadata.Name, in.Metadata.Version
		if name == "" || ver == "" {
			return nil, nil, errors.New("pip report: an installed distribution has no name or version")
		}
		sum := in.DownloadInfo.ArchiveInfo.Hashes["sha256"]
		if sum == "" {
			if h, ok := strings.CutPrefix(in.DownloadInfo.ArchiveInfo.Hash, "sha256="); ok {
				sum = h
			}
		}
		if sum == "" {
			return nil, nil, fmt.Errorf("pip report: %s %s has no sha256 (not from an index archive?)", name, ver)
		}
		pkgs = append(pkgs, name+"=="+ver)
		lock = append(lock, fmt.Sprintf("%s==%s --hash=sha256:%s", name, ver, sum))
	}
	sort.Strings(pkgs)
	sort.Strings(lock)
	return pkgs, lock, nil
}

// parseNpmLock lists the packages of an npm lock file (v2/v3) as
// name@version.
func parseNpmLock(b []byte) ([]string, error) {
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
			Name    string `json:"name"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return nil, fmt.Errorf("package-lock.json: %w", err)
	}
	var out []string
	for p, v := range lock.Packages {
		i := strings.LastIndex(p, "node_modules/")
		if i < 0 {
			continue
		}
		name := p[i+len("node_modules/"):]
		out = append(out, name+"@"+v.Version)
	}
	sort.Strings(out)
	return out, nil
}

// shellJoin quotes args for sh.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func chownTree(root string, uid, gid int) error {
	return filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// copyPath copies the file or folder rel of the skill folder dir to
// dst/rel: regular files and folders, symlinks as symlinks. Every file is
// opened beneath dir without following symlinks (safefs.OpenBeneath): the skill's
// owner cannot swap in a link to a host file while skillrun, as root,
// copies it into the build.
func copyPath(dir, rel, dst string) error {
	src := filepath.Join(dir, filepath.FromSlash(rel))
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(dir, p)
		d := filepath.Join(dst, r)
		switch {
		case fi.IsDir():
			return os.MkdirAll(d, 0o755)
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(t, d)
		case fi.Mode().IsRegular():
			if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
				return err
			}
			return safefs.CopyBeneath(dir, r, d, 0o644)
		}
		return fmt.Errorf("%s: not a file, folder or symlink", r)
	})
}
