//go:build !runtimeonly

package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/spec"
)

// skillCommand is the `skillrun skill` verb family (validate, inspect,
// list, bundle, run).
func skillCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "skill",
		Usage: skillUsage,
		Description: `A skill is a folder with SKILL.md (Agent Skills format), scripts and an
optional sandbox.yaml manifest. See docs/skills.md.

Exit codes of "skill run": 0 ok, 1 skillrun error, 2 bad input or usage,
3 skill failed, 4 timeout, 5 out of memory, 6 policy refusal, 7 output limit.`,
		Subcommands: []*cli.Command{
			skillValidateCommand(e),
			skillInspectCommand(e),
			skillListCommand(e),
			skillBundleCommand(e),
			skillRunCommand(e),
			skillExecCommand(e),
			skillPrepareCommand(e),
		},
	}
}

// failCode makes the process exit with code, err reported once (by
// env.report).
func (e *env) failCode(code int, err error) error {
	return &exitError{code: code, err: err}
}

// usageError reports a usage problem (exit 2).
func (e *env) usageError(format string, a ...any) error {
	return e.failCode(runner.ExitBadInput, fmt.Errorf(format, a...))
}

// formatFlag returns --format, one of allowed (the first is the
// default), or a usage error that lists them.
func (e *env) formatFlag(c *cli.Context, allowed ...string) (string, error) {
	format := c.String("format")
	if slices.Contains(allowed, format) {
		return format, nil
	}
	list := strings.Join(allowed[:len(allowed)-1], ", ") + " or " + allowed[len(allowed)-1]
	return "", e.usageError("--format: %q is not %s", format, list)
}

// loadSkill loads the skill named by the command's only argument; an
// invalid skill is bad input (exit 2).
func (e *env) loadSkill(c *cli.Context) (*spec.Skill, error) {
	if c.NArg() != 1 {
		for _, a := range c.Args().Slice()[min(1, c.NArg()):] {
			if strings.HasPrefix(a, "-") {
				return nil, e.usageError("%s: flag %s after the skill folder: flags go before DIR", "skill "+c.Command.Name, a)
			}
		}
		return nil, e.usageError("%s: requires exactly 1 argument, the skill folder", "skill "+c.Command.Name)
	}
	return e.loadSkillDir(c, c.Args().First())
}

// loadSkillDir loads the skill in dir, with the command's --with
// packages; an invalid skill is bad input (exit 2). Its deviations from
// the Agent Skills specification are logged as warnings (warnSkill).
func (e *env) loadSkillDir(c *cli.Context, dir string) (*spec.Skill, error) {
	sk, err := spec.Load(dir)
	if err != nil {
		return nil, e.failCode(runner.ExitBadInput, fmt.Errorf("skill %q: %s", dir, oneLine(err)))
	}
	e.warnSkill(sk)
	if err := e.withPackages(c, sk); err != nil {
		return nil, err
	}
	return sk, nil
}

// warnSkill logs the skill's deviations from the Agent Skills
// specification that do not touch the sandbox (spec.Skill.Warnings), one
// warning each, on stderr or --log (never stdout): the verbs that run,
// serve, bundle or prepare a skill accept them; skill validate --strict
// refuses them.
func (e *env) warnSkill(sk *spec.Skill) {
	for _, w := range sk.Warnings {
		e.log.Warn(fmt.Sprintf("skill %q: %s", sk.Name, w))
	}
}

// policyFlags are the operator's grants and overrides, shared by bundle
// and run.
func policyFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "network", Value: "none", Usage: "network grant: none (loopback only), allow (the hosts sandbox.yaml declares, nothing else) or host (FULL host network, unfiltered)"},
		&cli.StringSliceFlag{Name: "allow-host", Usage: "grant HOST:PORT or *.DOMAIN:PORT through the allowlist (repeatable; without --network allow, only these hosts)"},
		&cli.StringSliceFlag{Name: "resolve", Usage: "connect an allowed NAME:PORT to ADDRESS (NAME:PORT:ADDRESS, repeatable; the only way to reach a loopback or private address)"},
		&cli.StringFlag{Name: "memory", Usage: "memory limit, e.g. 256Mi", DefaultText: "manifest, else 512Mi"},
		&cli.Float64Flag{Name: "cpus", Usage: "CPU quota in cores", DefaultText: "manifest, else 1"},
		&cli.Int64Flag{Name: "pids", Usage: "task limit", DefaultText: "manifest, else 128"},
		&cli.DurationFlag{Name: "timeout", Usage: "wall-clock limit, e.g. 10s", DefaultText: "manifest, else 30s"},
		&cli.StringFlag{Name: "scratch", Usage: "size of the /tmp scratch tmpfs and max file size", DefaultText: "manifest, else 64Mi"},
		&cli.StringFlag{Name: "output-limit", Usage: "cap on stdout and stderr each; the skill is killed past it", DefaultText: "manifest, else 1Mi"},
		&cli.StringSliceFlag{Name: "env", Usage: "grant an environment variable: K=V, or K to pass the caller's value of K (repeatable)"},
		&cli.StringFlag{Name: "workspace", Usage: "host folder bound writable at /workspace"},
	}
}

// policyOptions reads the policy flags.
func (e *env) policyOptions(c *cli.Context) (runner.Options, error) {
	o := runner.Options{
		Grants: spec.Grants{
			Network:    c.String("network"),
			AllowHosts: c.StringSlice("allow-host"),
			Resolve:    c.StringSlice("resolve"),
			CPUs:       c.Float64("cpus"),
			Pids:       c.Int64("pids"),
			Timeout:    c.Duration("timeout"),
			Workspace:  c.String("workspace"),
		},
		Warn: func(m string) { e.log.Warn(m) },
	}
	var err error
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"memory", &o.Memory}, {"scratch", &o.Scratch}, {"output-limit", &o.OutputLimit}} {
		if v := c.String(f.name); v != "" {
			if *f.dst, err = spec.ParseBytes(v); err != nil {
				return o, e.usageError("--%s: %v", f.name, err)
			}
		}
	}
	if c.IsSet("timeout") && o.Timeout <= 0 {
		return o, e.usageError("--timeout: must be positive")
	}
	if c.IsSet("cpus") && o.CPUs <= 0 {
		return o, e.usageError("--cpus: must be positive")
	}
	if c.IsSet("pids") && o.Pids <= 1 {
		return o, e.usageError("--pids: must be at least 2")
	}
	for _, kv := range c.StringSlice("env") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			// K alone: the operator explicitly passes the caller's value.
			val, present := os.LookupEnv(k)
			if !present {
				return o, e.usageError("--env %s: not set in the caller's environment (use K=V)", k)
			}
			v = val
		}
		if k == "" {
			return o, e.usageError("--env %q: empty name", kv)
		}
		if o.Env == nil {
			o.Env = map[string]string{}
		}
		o.Env[k] = v
	}
	return o, nil
}

// humanBytes formats a size for people.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
