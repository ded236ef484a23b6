//go:build !runtimeonly

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/skillenv"
)

// maxInput bounds the input document read from a flag, file or stdin.
const maxInput = 16 << 20

func skillRunCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a skill in the sandbox: JSON input in, one JSON result out",
		ArgsUsage: "DIR",
		Description: `Input comes from --input, --input-file, or stdin (when it is not a
terminal); none means {}. stdout carries only the result.

Exit codes: 0 ok, 1 skillrun error, 2 bad input or usage, 3 skill failed,
4 timeout, 5 out of memory, 6 policy refusal, 7 output limit.`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "input JSON object"},
			&cli.StringFlag{Name: "input-file", Usage: "read the input JSON from this file ('-' for stdin)"},
			&cli.StringFlag{Name: "format", Value: "json", Usage: "result format: json or text"},
			&cli.BoolFlag{Name: "no-prepare", Usage: "never build a missing dependency environment (fail instead): the run touches no network beyond the skill's own grants"},
		}, append(policyFlags(), depsFlags()...)...),
		Action: func(c *cli.Context) error {
			format, err := e.formatFlag(c, "json", "text")
			if err != nil {
				return err
			}
			rt, err := e.skillEngine(c)
			if err != nil {
				return err
			}
			// Start the back end's slow kernel work while the skill is
			// loaded and its bundle written.
			prepare(rt)
			sk, err := e.loadSkill(c)
			if err != nil {
				return err
			}
			opts, err := e.policyOptions(c)
			if err != nil {
				return err
			}
			raw, err := e.readInput(c)
			if err != nil {
				return err
			}
			input, err := runner.NewInput(sk, raw)
			if err != nil {
				return e.failCode(runner.ExitBadInput, fmt.Errorf("skill %q: %w", sk.Name, err))
			}
			if !sk.Deps.Empty() {
				if opts.Deps, err = e.depsManager(c, rt, !c.Bool("no-prepare")); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			res, err := runner.Run(ctx, rt, sk, input, opts)
			if err != nil {
				if runner.IsInputError(err) {
					return e.failCode(runner.ExitBadInput, fmt.Errorf("skill %q: %w", sk.Name, err))
				}
				if errors.Is(err, skillenv.ErrNotPrepared) {
					return e.failCode(runner.ExitBadInput, verbError("skill run", sk.Name, err))
				}
				return verbError("skill run", sk.Name, err)
			}
			if err := writeResult(e.stdout, res, format); err != nil {
				return err
			}
			if code := res.ProcessExitCode(); code != 0 {
				return exitStatus(code)
			}
			return nil
		},
	}
}

// verbError is err of verb on skill name, for the error line: prefixed
// with the verb and the skill, unless err is the runner's and names the
// skill first (runner.SkillError: `skill "NAME": dependencies: ...`),
// which it says once.
func verbError(verb, name string, err error) error {
	if se, ok := err.(*runner.SkillError); ok && se.Skill == name {
		return err
	}
	return fmt.Errorf("%s %q: %w", verb, name, err)
}

// readInput returns the input document from --input, --input-file or
// stdin.
func (e *env) readInput(c *cli.Context) ([]byte, error) {
	if c.IsSet("input") && c.IsSet("input-file") {
		return nil, e.usageError("--input and --input-file are exclusive")
	}
	if c.IsSet("input") {
		return []byte(c.String("input")), nil
	}
	var r io.Reader
	name := "stdin"
	switch f := c.String("input-file"); f {
	case "":
		if isTerminal(e.stdin) {
			return nil, nil
		}
		r = e.stdin
	case "-":
		r = e.stdin
	default:
		fh, err := os.Open(f)
		if err != nil {
			return nil, e.usageError("--input-file: %v", err)
		}
		defer fh.Close()
		r, name = fh, f
	}
	if r == nil {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return nil, e.usageError("input: read %s: %v", name, err)
	}
	if len(b) > maxInput {
		return nil, e.usageError("input: %s is larger than %d bytes", name, maxInput)
	}
	return b, nil
}

// isTerminal reports whether r is a character device (a terminal): then
// there is no piped input to wait for.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok || f == nil {
		return r == nil
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// writeResult prints the result as JSON or as text for people.
func writeResult(w io.Writer, res *runner.Result, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return enc.Encode(res)
	}
	var b strings.Builder
	status := "ok"
	if !res.OK {
		status = "FAILED"
		if res.StoppedReason != "" {
			status = "STOPPED (" + res.StoppedReason + ")"
		}
	}
	fmt.Fprintf(&b, "%s: %s, exit %d, %d ms wall, %d ms cpu, peak %s\n", res.Skill, status, res.ExitCode,
		res.Usage.WallMS, res.Usage.CPUMS, humanBytes(res.Usage.PeakMemoryBytes))
	if res.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", res.Error)
	}
	switch o := res.Output.(type) {
	case json.RawMessage:
		var c bytes.Buffer
		if json.Compact(&c, o) == nil {
			o = c.Bytes()
		}
		fmt.Fprintf(&b, "output: %s\n", terminalSafe(string(o)))
	case string:
		if o != "" {
			fmt.Fprintf(&b, "output:\n%s\n", terminalSafe(strings.TrimRight(o, "\n")))
		}
	}
	if res.OutputDropped > 0 {
		fmt.Fprintf(&b, "(%d more bytes of output left out: escaped as JSON, it would exceed the output limit)\n", res.OutputDropped)
	}
	if s := strings.TrimRight(res.Stderr, "\n"); s != "" {
		fmt.Fprintf(&b, "stderr:\n%s\n", terminalSafe(s))
	}
	l := res.Limits
	if l == nil {
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "limits: network=%s timeout=%dms output=%s scratch=%s", l.Network, l.TimeoutMS, humanBytes(l.OutputBytes), humanBytes(l.ScratchBytes))
	// Each is nil when nothing enforced it (rootless without cgroups).
	if l.MemoryBytes != nil {
		fmt.Fprintf(&b, " memory=%s", humanBytes(*l.MemoryBytes))
		if e := l.Enforcement; e != nil && e.Memory.Scope == runner.ScopeProcess {
			b.WriteString("/process")
		}
	}
	if l.CPUs != nil {
		fmt.Fprintf(&b, " cpus=%g", *l.CPUs)
	}
	if l.Pids != nil {
		fmt.Fprintf(&b, " pids=%d", *l.Pids)
	}
	if len(l.NotEnforced) > 0 {
		fmt.Fprintf(&b, " (not enforced: %s)", strings.Join(l.NotEnforced, ","))
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// terminalSafe makes what a skill wrote safe to print on a person's
// terminal: invalid UTF-8 is replaced and control characters other than
// newline and tab are shown escaped (\x1b), so a skill cannot move the
// cursor, retitle the terminal or fake skillrun's own lines.
func terminalSafe(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
