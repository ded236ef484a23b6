package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"

	"github.com/moby/sys/userns"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/skillrun/skillrun/runtime"
)

// version is set by the Makefile with -X main.version=...
var version = "0.1.0-dev"

// gitCommit is set by the Makefile with -X main.gitCommit=...
var gitCommit = ""

// exitError is the one way an Action ends with a status other than 1.
// err, when set, is reported once by report (logged, and printed to
// stderr when the log is not stderr); a nil err reports nothing: the
// status is not a failure of skillrun itself (a container's own status
// for run and exec, a skill result already printed).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return "exit status " + strconv.Itoa(e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exitStatus ends an Action with code and nothing to report.
func exitStatus(code int) error { return &exitError{code: code} }

// env is what a command needs from its process, injected so tests can run
// the whole app in-process with a fake back end.
type env struct {
	// argv is the command line, the program's name first.
	argv   []string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// backend builds the engine; tests replace it with the fake.
	backend func(runtime.Options) (runtime.Runtime, error)
	// execve replaces this process with a companion binary (unix.Exec;
	// companion.go); tests record it instead. Nil: the command fails.
	execve func(path string, argv, envv []string) error
	// log is the logger every command reports through.
	log *logrus.Logger
	// logToStderr is true when --log is not set (errors then go to stderr
	// once, through the logger).
	logToStderr bool
	// closers run when the app returns (the --log file).
	closers []io.Closer
	// engines are the back ends built (openEngine), closed when the app
	// returns (closeBackend).
	engines []runtime.Runtime
	// unknownCommand is set when the command line named no verb of ours
	// (exit 1, as a usage error).
	unknownCommand bool
}

// run executes the CLI and returns the process exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, backend: newBackend, execve: unix.Exec}
	return e.run(args)
}

func (e *env) run(args []string) int {
	e.argv = args
	e.log = logrus.New()
	e.log.SetOutput(e.stderr)
	e.log.SetFormatter(plainFormatter{})
	e.logToStderr = true
	defer func() {
		for _, rt := range e.engines {
			closeBackend(rt)
		}
		for _, c := range e.closers {
			c.Close()
		}
	}()
	app := e.newApp()
	err := app.Run(reorderArgs(app, args))
	if code := e.report(err); code != 0 || !e.unknownCommand {
		return code
	}
	return 1
}

// report turns the final error into an exit status, logging it exactly once.
func (e *env) report(err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) && ee.err == nil {
		return ee.code
	}
	var ce cli.ExitCoder
	if errors.As(err, &ce) && ce.ExitCode() == 0 {
		return 0
	}
	msg := err.Error()
	e.log.Error(msg)
	if !e.logToStderr {
		fmt.Fprintln(e.stderr, "skillrun: "+msg)
	}
	if ee != nil {
		return ee.code
	}
	return 1
}

// defaultRoot is runc's choice of state root: $XDG_RUNTIME_DIR/skillrun for
// an unprivileged user, and for root inside a user namespace made by one
// (rootless podman runs us as uid 0 there with USER set to the user);
// /run/skillrun for the real root.
func defaultRoot() string {
	if platform == "darwin" {
		return darwinRoot()
	}
	xdg := os.Getenv("XDG_RUNTIME_DIR")
	if os.Geteuid() == 0 {
		if xdg == "" || !userns.RunningInUserNS() || os.Getenv("USER") == "root" {
			return "/run/skillrun"
		}
		return filepath.Join(xdg, "skillrun")
	}
	if xdg != "" {
		return filepath.Join(xdg, "skillrun")
	}
	// A private per-user directory; the back end creates it 0700 and
	// refuses one owned by somebody else.
	return filepath.Join(os.TempDir(), "skillrun-"+strconv.Itoa(os.Geteuid()))
}

func (e *env) newApp() *cli.App {
	app := &cli.App{
		Name:                 "skillrun",
		Usage:                "run AI agent skills and OCI containers in a sandbox",
		Version:              version,
		Reader:               e.stdin,
		Writer:               e.stdout,
		ErrWriter:            e.stderr,
		HideHelpCommand:      false, // `skillrun help [VERB]`, as runc
		EnableBashCompletion: true,  // skillrun ... --generate-bash-completion: the shell completion scripts of make dist
		// Only main exits: errors come back from Run.
		ExitErrHandler: func(*cli.Context, error) {},
		Description: `skillrun is a runc-compatible OCI runtime (create, start, run, state, kill,
delete, list, exec, ps, pause, resume, events, update, features, spec) and a
sandboxed runner for Agent Skills (skillrun skill run ./my-skill).

  skillrun run BUNDLE          run the bundle in BUNDLE with a generated ID
  skillrun run -b BUNDLE ID    runc's form
  skillrun skill run DIR       run a skill folder end to end, JSON in and out`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "debug", Usage: "enable debug logging"},
			&cli.StringFlag{Name: "log", Usage: "set the log file to write skillrun logs to (default is '/dev/stderr')"},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "set the log format ('text' (default), or 'json')"},
			&cli.StringFlag{Name: "root", Value: defaultRoot(), Usage: "root directory for storage of container state (this should be located in tmpfs)"},
			&cli.BoolFlag{Name: "systemd-cgroup", Usage: "manage the containers' cgroups through systemd (needs a running systemd reachable over D-Bus)"},
			&cli.StringFlag{Name: "rootless", Value: "auto", Usage: "ignore cgroup permission errors ('true', 'false', or 'auto')"},
		},
		Before: e.before,
		Commands: []*cli.Command{
			createCommand(e),
			deleteCommand(e),
			eventsCommand(e),
			execCommand(e),
			featuresCommand(e),
			killCommand(e),
			listCommand(e),
			pauseCommand(e),
			psCommand(e),
			resumeCommand(e),
			runCommand(e),
			specCommand(e),
			startCommand(e),
			stateCommand(e),
			updateCommand(e),
			skillCommand(e),
			sandboxCommand(e),
			mcpCommand(e),
			openshellCommand(e),
		},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error { return err },
		CommandNotFound: func(c *cli.Context, name string) {
			fmt.Fprintf(e.stderr, "skillrun: no such command %q (see skillrun --help)\n", name)
			e.unknownCommand = true
		},
	}
	app.Commands = append(app.Commands, docsCommands(e)...)
	setUsageErrors(app.Commands, "", false)
	cli.VersionPrinter = func(c *cli.Context) {
		w := c.App.Writer
		fmt.Fprintln(w, "skillrun version", c.App.Version)
		if gitCommit != "" {
			fmt.Fprintln(w, "commit:", gitCommit)
		}
		fmt.Fprintln(w, "spec:", specs.Version)
		fmt.Fprintln(w, "go:", goruntime.Version())
		for _, l := range versionExtra() {
			fmt.Fprintln(w, l)
		}
	}
	return app
}

// skillFamilies are the verbs whose usage errors exit 2 (the skill
// runner's documented code); the runtime verbs exit 1, as runc's.
var skillFamilies = map[string]bool{"skill": true, "sandbox": true, "mcp": true}

// setUsageErrors makes every command's flag errors one line naming the
// verb and where its help is, without the whole help text, and hides the
// help subcommand of verbs that have no subcommands.
func setUsageErrors(cmds []*cli.Command, prefix string, skill bool) {
	for _, c := range cmds {
		code := 1
		if skill || skillFamilies[c.Name] {
			code = 2
		}
		name := strings.TrimSpace(prefix + " " + c.Name)
		c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
			return &exitError{code: code, err: fmt.Errorf("%s: %w (see skillrun %s --help)", name, err, name)}
		}
		if len(c.Subcommands) == 0 {
			c.HideHelpCommand = true
		}
		setUsageErrors(c.Subcommands, name, code == 2)
	}
}

// before configures logging from the global flags.
func (e *env) before(c *cli.Context) error {
	if c.Bool("debug") {
		e.log.SetLevel(logrus.DebugLevel)
	}
	toFile := false
	if p := c.String("log"); p != "" && p != "/dev/stderr" {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_SYNC, 0o644)
		if err != nil {
			return fmt.Errorf("open log file: %w", err)
		}
		e.closers = append(e.closers, f)
		e.log.SetOutput(f)
		e.logToStderr = false
		toFile = true
	}
	switch f := c.String("log-format"); {
	case f == "json":
		e.log.SetFormatter(&logrus.JSONFormatter{})
	case (f == "text" || f == "") && toFile:
		e.log.SetFormatter(&logrus.TextFormatter{DisableColors: true})
	case f == "text" || f == "":
		e.log.SetFormatter(plainFormatter{})
	default:
		return fmt.Errorf("--log-format: %q is not text or json", f)
	}
	// libcontainer logs through logrus' standard logger (including what the
	// container's init forwards); send it where ours goes.
	std := logrus.StandardLogger()
	std.SetOutput(e.log.Out)
	std.SetFormatter(e.log.Formatter)
	std.SetLevel(e.log.GetLevel())
	switch r := c.String("rootless"); r {
	case "auto", "true", "false":
	default:
		return fmt.Errorf("invalid --rootless value %q (want true, false or auto)", r)
	}
	return nil
}

// engine builds the back end from the global flags.
func (e *env) engine(c *cli.Context) (runtime.Runtime, error) {
	return e.openEngine(e.engineOptions(c))
}

// openEngine builds a back end with o, to be closed when the app returns.
func (e *env) openEngine(o runtime.Options) (runtime.Runtime, error) {
	rt, err := e.backend(o)
	if err != nil {
		return nil, err
	}
	e.engines = append(e.engines, rt)
	return rt, nil
}

// skillEngine is the back end for skill runs: like engine, but an
// unprivileged caller without a writable cgroup gets a delegated systemd
// scope when the host offers one (runtime.Options.DelegatedScope).
func (e *env) skillEngine(c *cli.Context) (runtime.Runtime, error) {
	o := e.engineOptions(c)
	o.DelegatedScope = true
	o.LimitsReported = true
	return e.openEngine(o)
}

func (e *env) engineOptions(c *cli.Context) runtime.Options {
	return withEgressHelper(runtime.Options{
		Root:          c.String("root"),
		SystemdCgroup: c.Bool("systemd-cgroup"),
		Rootless:      c.String("rootless"),
		// Only create and run define it; elsewhere it reads false.
		AcceptDegradation: c.Bool("accept-degradation"),
		Debug:             c.Bool("debug"),
		Warn:              func(msg string) { e.log.Warn(msg) },
	})
}

// darwinRoot: /run cannot be created on macOS and XDG_RUNTIME_DIR is
// usually unset there.
func darwinRoot() string {
	if os.Geteuid() == 0 {
		return "/var/run/skillrun"
	}
	return filepath.Join(os.TempDir(), "skillrun-"+strconv.Itoa(os.Geteuid()))
}

// prepare lets a back end start slow kernel work (runtime.Preparer) as
// soon as a command knows it will create a container, before it reads
// the bundle or registers its signal handlers.
func prepare(rt runtime.Runtime) {
	if p, ok := rt.(runtime.Preparer); ok {
		p.Prepare()
	}
}

// checkArgs enforces runc's argument counts with its wording.
func checkArgs(c *cli.Context, min, max int) error {
	n := c.NArg()
	name := c.Command.Name
	switch {
	case min == max && n != min:
		return fmt.Errorf("%s: %q requires exactly %d argument(s)", name, name, min)
	case n < min:
		return fmt.Errorf("%s: %q requires a minimum of %d argument(s)", name, name, min)
	case max >= 0 && n > max:
		return fmt.Errorf("%s: %q requires a maximum of %d argument(s)", name, name, max)
	}
	return nil
}

// joinLines is a small helper for multi-line usage text.
func joinLines(l ...string) string { return strings.Join(l, "\n") }
