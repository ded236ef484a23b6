//go:build !runtimeonly

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/skillenv"
	"github.com/skillrun/skillrun/spec"
)

// depsFlags configure dependency environments: shared by skill prepare,
// run, bundle and mcp serve.
func depsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "with", Usage: "add a package to the skill's environment: a pip requirement (name==1.2) or npm:NAME@VERSION (repeatable; part of the environment's key)"},
		&cli.StringFlag{Name: "env-cache", EnvVars: []string{"SKILLRUN_ENV_CACHE"}, Usage: "dependency environment cache (default: /var/lib/skillrun/envs as root, ~/.cache/skillrun/envs otherwise)"},
		&cli.StringFlag{Name: "pip-index-url", Usage: "PEP 503 index builds install Python packages from (default: PIP_INDEX_URL, pip.conf's index-url, else PyPI)"},
		&cli.StringFlag{Name: "npm-registry", Usage: "npm registry builds install Node packages from (default: npm_config_registry, ~/.npmrc's registry, else registry.npmjs.org)"},
		&cli.StringFlag{Name: "pip-cert", Usage: "CA bundle pip trusts for the index (default: PIP_CERT; else the host's /etc/ssl)"},
		&cli.StringFlag{Name: "npm-cafile", Usage: "extra CA bundle Node trusts for the registry (default: NODE_EXTRA_CA_CERTS, ~/.npmrc's cafile)"},
		&cli.BoolFlag{Name: "allow-source-builds", Usage: "let pip build source distributions (runs their setup code, in the build sandbox)", DefaultText: "false: binary wheels only"},
		&cli.BoolFlag{Name: "allow-install-scripts", Usage: "let npm run install scripts (in the build sandbox)", DefaultText: "false: npm runs with --ignore-scripts"},
		&cli.DurationFlag{Name: "build-timeout", Value: skillenv.DefaultBuildTimeout, Usage: "wall-clock limit of one environment build"},
	}
}

// depsManager builds the environment manager of the command's flags;
// build says whether it may build missing environments.
func (e *env) depsManager(c *cli.Context, rt runtime.Runtime, build bool) (*skillenv.Manager, error) {
	dir := c.String("env-cache")
	if dir == "" {
		d, err := skillenv.DefaultDir()
		if err != nil {
			return nil, e.usageError("--env-cache: %v", err)
		}
		dir = d
	}
	ix := skillenv.OperatorIndex()
	if v := c.String("pip-index-url"); v != "" {
		ix.PipIndexURL = v
	}
	if v := c.String("npm-registry"); v != "" {
		ix.NpmRegistry = v
	}
	if v := c.String("pip-cert"); v != "" {
		ix.PipCert = v
	}
	if v := c.String("npm-cafile"); v != "" {
		ix.NpmCAFile = v
	}
	for flag, v := range map[string]string{"pip-index-url": ix.PipIndexURL, "npm-registry": ix.NpmRegistry} {
		if v == "" {
			continue
		}
		if err := skillenv.CheckIndexURL(v); err != nil {
			return nil, e.usageError("--%s: %v", flag, err)
		}
	}
	if c.Duration("build-timeout") <= 0 {
		return nil, e.usageError("--build-timeout: must be positive")
	}
	m := &skillenv.Manager{
		Cache:        skillenv.Cache{Dir: dir},
		Runtime:      rt,
		Index:        ix,
		Policy:       skillenv.Policy{SourceBuilds: c.Bool("allow-source-builds"), InstallScripts: c.Bool("allow-install-scripts")},
		Build:        build,
		BuildTimeout: c.Duration("build-timeout"),
	}
	if isTerminalWriter(e.stderr) {
		m.Progress = progressLine(e.stderr)
	}
	// The flags that choose this cache and key, for the hint of a missing
	// environment (skill prepare must build the same one).
	var hint []string
	for _, f := range []string{"env-cache", "pip-index-url", "npm-registry", "pip-cert", "npm-cafile"} {
		if c.IsSet(f) {
			hint = append(hint, "--"+f, shellJoin1(c.String(f)))
		}
	}
	for _, f := range []string{"allow-source-builds", "allow-install-scripts"} {
		if c.Bool(f) {
			hint = append(hint, "--"+f)
		}
	}
	for _, w := range c.StringSlice("with") {
		hint = append(hint, "--with", shellJoin1(w))
	}
	m.PrepareHint = strings.Join(hint, " ")
	return m, nil
}

// shellJoin1 quotes s for a command line a person pastes, when needed.
func shellJoin1(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"$`\\|&;<>()*?[]#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func skillPrepareCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "prepare",
		Usage:     "build skills' dependency environments (requirements.txt, package.json, sandbox.yaml dependencies) into the cache",
		ArgsUsage: "DIR...",
		Description: `Each environment is built once, in the skill's own sandbox (network only
to the package index), and kept read-only under a key that hashes the
declaration, the interpreter and the install policy. "skill run" mounts it.
An existing environment is re-hashed and rebuilt when its files changed.

With --gc, removes environments unused for --max-age (never one in use, nor
those of the skills named as DIR). Prints one JSON line per skill.`,
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "rebuild", Usage: "rebuild even when the environment is complete"},
			&cli.BoolFlag{Name: "gc", Usage: "remove unused environments instead of building"},
			&cli.DurationFlag{Name: "max-age", Value: 0, Usage: "with --gc: keep environments used within this long"},
		}, depsFlags()...),
		Action: func(c *cli.Context) error {
			if c.Bool("gc") {
				return e.prepareGC(c)
			}
			if c.NArg() == 0 {
				return e.usageError("skill prepare: requires at least 1 argument, a skill folder")
			}
			var skills []*spec.Skill
			for _, dir := range c.Args().Slice() {
				if strings.HasPrefix(dir, "-") {
					return e.usageError("skill prepare: flag %s after the skill folders: flags go first", dir)
				}
				sk, err := e.loadSkillDir(c, dir)
				if err != nil {
					return err
				}
				skills = append(skills, sk)
			}
			rt, err := e.skillEngine(c)
			if err != nil {
				return err
			}
			m, err := e.depsManager(c, rt, true)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			enc := json.NewEncoder(e.stdout)
			enc.SetEscapeHTML(false)
			for _, sk := range skills {
				rep, err := m.Prepare(ctx, sk, true, c.Bool("rebuild"))
				if err != nil {
					return fmt.Errorf("skill prepare %q: %w", sk.Name, err)
				}
				if err := enc.Encode(rep); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// prepareGC is skill prepare --gc.
func (e *env) prepareGC(c *cli.Context) error {
	keep := map[string]bool{}
	pol := skillenv.Policy{SourceBuilds: c.Bool("allow-source-builds"), InstallScripts: c.Bool("allow-install-scripts")}
	for _, dir := range c.Args().Slice() {
		sk, err := spec.Load(dir)
		if err != nil {
			return e.failCode(runner.ExitBadInput, fmt.Errorf("skill %q: %s", dir, strings.ReplaceAll(err.Error(), "\n", "; ")))
		}
		plan, err := skillenv.PlanFor(sk, pol)
		if err != nil {
			return fmt.Errorf("skill prepare --gc %q: %w", sk.Name, err)
		}
		if plan != nil {
			keep[plan.Key] = true
		}
	}
	m, err := e.depsManager(c, nil, false)
	if err != nil {
		return err
	}
	if _, err := os.Stat(m.Cache.Dir); errors.Is(err, os.ErrNotExist) {
		return json.NewEncoder(e.stdout).Encode(skillenv.Collected{Removed: []string{}})
	}
	out, err := m.Cache.Collect(c.Duration("max-age"), keep)
	if err != nil {
		return fmt.Errorf("skill prepare --gc: %w", err)
	}
	if out.Removed == nil {
		out.Removed = []string{}
	}
	return json.NewEncoder(e.stdout).Encode(out)
}

// isTerminalWriter reports whether w is a terminal.
func isTerminalWriter(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressLine shows a long build on a terminal: one line, rewritten in
// place with the elapsed time, cleared when the build ends (msg ""). A
// small ticker rather than a progress-bar library: there is no amount to
// show, only that work goes on.
func progressLine(w io.Writer) func(string) {
	var mu sync.Mutex
	var stop chan struct{}
	var done chan struct{}
	return func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		if stop != nil {
			close(stop)
			<-done
			stop = nil
		}
		if msg == "" {
			return
		}
		stop, done = make(chan struct{}), make(chan struct{})
		go func(stop <-chan struct{}, done chan<- struct{}) {
			defer close(done)
			start := time.Now()
			frames := `|/-\`
			t := time.NewTicker(150 * time.Millisecond)
			defer t.Stop()
			for i := 0; ; i++ {
				fmt.Fprintf(w, "\r%c %s (%.0fs)\x1b[K", frames[i%len(frames)], msg, time.Since(start).Seconds())
				select {
				case <-stop:
					fmt.Fprint(w, "\r\x1b[K")
					return
				case <-t.C:
				}
			}
		}(stop, done)
	}
}

// withPackages adds the command's --with packages to sk's dependencies.
func (e *env) withPackages(c *cli.Context, sk *spec.Skill) error {
	if w := c.StringSlice("with"); len(w) > 0 {
		if err := sk.WithPackages(w); err != nil {
			return e.usageError("%s", oneLine(err))
		}
	}
	return nil
}
