package skillenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	goruntime "runtime"
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
	// PrepareHint is the flags that select this manager's cache and
	// index (--env-cache DIR ...), repeated in the ErrNotPrepared hint so
	// that the command it suggests prepares the environment it lacks.
	PrepareHint string
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
				prep := "skillrun skill prepare"
				if m.PrepareHint != "" {
					prep += " " + m.PrepareHint
				}
				return nil, nil, nil, fmt.Errorf("%w (key %s): run `%s %s` first", ErrNotPrepared, plan.Key[:12], prep, sk.Dir)
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
	b := &build{key: plan.Key, staging: staging, cache: m.Cache, marker: &Marker{Key: plan.Key}, env: map[string]string{},
		script: []string{"set -eu", "exec >>/workspace/build.log 2>&1"}}
	ecos := m.ecosystems(plan)
	opts, err := m.stage(ctx, ecos, b)
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
	opts.Command = []string{"/bin/sh", "-c", strings.Join(b.script, "\n")}
	opts.CommandEnv = b.env
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
	for _, e := range ecos {
		if err := e.collect(b); err != nil {
			m.keepLog(plan.Key, filepath.Join(staging, "build.log"))
			return nil, err
		}
	}
	mk := b.marker
	if err := m.Cache.install(staging, mk); err != nil {
		return nil, fmt.Errorf("install environment: %w", err)
	}
	keep = true
	_ = os.Remove(m.Cache.LogPath(plan.Key))
	return &Report{Skill: sk.Name, Status: StatusBuilt, Key: plan.Key, Dir: m.Cache.EnvDir(plan.Key),
		Python: mk.Python, Node: mk.NodePackages, BuildMS: time.Since(start).Milliseconds(), Build: res}, nil
}

// ecosystem is one package ecosystem of an environment (python.go,
// node.go): it stages its build inputs and install commands into a build,
// and reads back what the build installed.
type ecosystem interface {
	// indexURL is the package index the build fetches from (the
	// operator's, or the ecosystem's default) and the name standing for
	// it when the operator gave it by address.
	indexURL() (url, synthetic string)
	// stage writes the ecosystem's inputs into b's staging folder and
	// adds its install commands (and environment) to b's script; a is
	// how the build reaches the index.
	stage(b *build, a *indexAccess) error
	// collect reads what the build installed into b's marker, and keeps
	// the lock it resolved (when the skill ships none) for later builds
	// of the same key.
	collect(b *build) error
}

// ecosystems are the ecosystems plan holds, Python first.
func (m *Manager) ecosystems(plan *Plan) []ecosystem {
	var out []ecosystem
	if plan.Python != nil {
		out = append(out, &python{plan: plan.Python, index: m.Index, policy: m.Policy})
	}
	if plan.Node != nil {
		out = append(out, &node{plan: plan.Node, index: m.Index, policy: m.Policy})
	}
	return out
}

// build is one environment build: its staging folder (the sandbox's
// /workspace) and what the ecosystems add to it.
type build struct {
	key     string
	staging string
	// cache has the locks earlier builds of key resolved.
	cache Cache
	// script is the build's shell script, a command a line; env its
	// environment.
	script []string
	env    map[string]string
	// marker is the environment's marker, filled as the ecosystems
	// stage and collect.
	marker *Marker
}

// resolvedPath is where the lock name that a build of b's key resolved
// is kept.
func (b *build) resolvedPath(name string) string { return b.cache.resolvedPath(b.key, name) }

// resolvedLines reads a lock the first build of b's key resolved, or nil.
func (b *build) resolvedLines(name string) []string {
	data, err := os.ReadFile(b.resolvedPath(name))
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// stage grants the build network access to each ecosystem's index and
// has the ecosystems stage their inputs into b; it returns the run
// options granting the indexes.
func (m *Manager) stage(ctx context.Context, ecos []ecosystem, b *build) (runner.Options, error) {
	var opts runner.Options
	lookup := m.lookup
	if lookup == nil {
		lookup = lookupHost
	}
	for _, e := range ecos {
		url, synthetic := e.indexURL()
		a, err := access(ctx, url, synthetic, lookup)
		if err != nil {
			return opts, err
		}
		opts.AllowHosts = append(opts.AllowHosts, a.Allow)
		if a.Resolve != "" {
			opts.Resolve = append(opts.Resolve, a.Resolve)
		}
		if err := e.stage(b, a); err != nil {
			return opts, err
		}
	}
	// The build's own inputs are not part of the environment.
	b.script = append(b.script, "rm -rf /workspace/.build", "echo '== done'")
	return opts, nil
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

// keepLog copies a failed build's log into the cache's logs folder and
// returns its last line.
func (m *Manager) keepLog(key, log string) string {
	b, err := os.ReadFile(log)
	if err != nil {
		return "no build log"
	}
	_ = safefs.WriteFileAtomic(m.Cache.LogPath(key), b, 0o600)
	return buildCause(string(b))
}

// buildCause is the one line of a failed build's log that says why: npm's
// and pip's own error lines (npm's pointer to its log, a path inside a
// sandbox that is gone, is not one), else the last line.
func buildCause(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	var cause []string
	for i, raw := range lines {
		l := strings.TrimSpace(raw)
		switch {
		case strings.HasPrefix(l, "npm error ") || strings.HasPrefix(l, "npm ERR! "):
			msg := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(l, "npm error "), "npm ERR! "))
			// npm's pointers to its log (npm 8 puts the path on a line of
			// its own) and its error code are not the cause.
			if strings.HasPrefix(msg, "A complete log") || strings.HasPrefix(msg, "code ") || strings.HasPrefix(msg, "Log files") ||
				strings.Contains(msg, "/_logs/") || msg == "" {
				continue
			}
			if len(cause) < 2 {
				cause = append(cause, msg)
			}
		case strings.HasPrefix(l, "ERROR: "):
			cause = append(cause, l)
			// pip's hash mismatch: the requirement and the two sums follow.
			for _, next := range lines[i+1 : min(i+6, len(lines))] {
				if n := strings.TrimSpace(next); strings.HasPrefix(n, "Expected sha256") || strings.HasPrefix(n, "Got ") || strings.Contains(n, " from ") {
					// pip aligns the sums with spaces: one is enough on one line.
					cause = append(cause, strings.Join(strings.Fields(n), " "))
				}
			}
		}
		if len(cause) >= 4 {
			break
		}
	}
	if len(cause) > 0 {
		return strings.Join(cause, "; ")
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "== ") {
			return l
		}
	}
	return "empty build log"
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
