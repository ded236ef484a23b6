//go:build !runtimeonly

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	goruntime "runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/mcpserver"
	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/spec"
)

// mcpCommand is the `skillrun mcp` verb family.
func mcpCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:        "mcp",
		Usage:       mcpUsage,
		Subcommands: []*cli.Command{mcpServeCommand(e)},
	}
}

func mcpServeCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve every skill as an MCP tool (stdio, or streamable HTTP with --http)",
		Description: `One tool per skill; every call runs the skill in a fresh sandbox with
the operator's grants given here (a call brings only its input and cannot
widen them). stdout carries only the MCP stdio stream; logs go to stderr
or --log. See docs/mcp.md.`,
		Flags: append([]cli.Flag{
			&cli.StringSliceFlag{Name: "skills", Usage: "skill folder, or folder searched for skills (repeatable)", Required: true},
			&cli.DurationFlag{Name: "watch", Value: 2 * time.Second, Usage: "rescan the skill folders this often: skills added, removed or changed update the tool list (0: never)"},
			&cli.StringFlag{Name: "http", Usage: "serve streamable HTTP on ADDR (loopback, e.g. 127.0.0.1:8080) at /mcp instead of stdio"},
			&cli.IntFlag{Name: "pool", Value: 1, Usage: "warm sandboxes kept launched per skill, entry point waiting for its input (0: every call runs cold)"},
			&cli.DurationFlag{Name: "pool-max-age", Value: mcpserver.DefaultPoolMaxAge, Usage: "recycle a warm sandbox that waited this long for a call"},
			&cli.BoolFlag{Name: "no-commands", Usage: "do not serve run_command, write_file and read_file (only the skills' own tools)"},
			&cli.BoolFlag{Name: "show-refused", Usage: "list the tools of skills every call of which the grants refuse (marked); hidden by default"},
			&cli.StringFlag{Name: "workspace-root", Usage: "give each session its own workspace folder below DIR (removed when the session ends)"},
			&cli.BoolFlag{Name: "keep-workspaces", Usage: "with --workspace-root: keep a session's workspace when it ends"},
			&cli.StringFlag{Name: "workspace-quota", Value: "256Mi", Usage: "bytes a session's workspace may hold, checked before each command and write"},
			&cli.IntFlag{Name: "max-sessions", Value: mcpserver.DefaultMaxSessions, Usage: "sessions holding a workspace at once; more are refused"},
			&cli.DurationFlag{Name: "session-timeout", Value: defaultSessionTimeout, Usage: "with --http: end a session no request came for in this long (its calls' sandboxes killed, its workspace removed); 0: never"},
		}, append(policyFlags(), depsFlags()...)...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return e.usageError("mcp serve: takes no arguments (use --skills DIR)")
			}
			// As skill run: a delegated systemd scope when the host offers
			// one. A long-lived server launches many sandboxes (warm ones
			// in the background): the runtime's warnings, the same for
			// each, are logged once.
			o := e.engineOptions(c)
			o.DelegatedScope = true
			o.LimitsReported = true
			o.Warn = onceWarn(e)
			rt, err := e.openEngine(o)
			if err != nil {
				return err
			}
			opts, err := e.policyOptions(c)
			if err != nil {
				return err
			}
			// A skill that declares packages gets its environment, built
			// on its first call when missing (skill prepare builds ahead).
			if opts.Deps, err = e.depsManager(c, rt, true); err != nil {
				return err
			}
			if c.Int("pool") < 0 || c.Duration("pool-max-age") < 0 {
				return e.usageError("--pool, --pool-max-age: must not be negative")
			}
			serverGC(os.LookupEnv)
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			// What a killed predecessor left (its sandboxes, warm ones
			// included, their bundles) goes before the first call and
			// before the pools launch.
			runner.CollectStale(ctx, rt, opts.TempDir)
			if err := e.withPackages(c, spec.Bare()); err != nil {
				return err // checked once for every skill
			}
			quota, err := spec.ParseBytes(c.String("workspace-quota"))
			if err != nil || quota <= 0 {
				return e.usageError("--workspace-quota: %q is not a size such as 256Mi", c.String("workspace-quota"))
			}
			if c.Duration("session-timeout") < 0 {
				return e.usageError("--session-timeout: must not be negative")
			}
			if c.Int("max-sessions") < 1 {
				return e.usageError("--max-sessions: must be at least 1")
			}
			if c.IsSet("workspace-root") && opts.Workspace != "" {
				return e.usageError("--workspace-root and --workspace are exclusive: one folder per session, or one for all")
			}
			srv, err := mcpserver.New(mcpserver.Options{Runtime: rt, Dirs: c.StringSlice("skills"), Run: opts, Version: version, With: c.StringSlice("with"),
				Pool: c.Int("pool"), PoolMaxAge: c.Duration("pool-max-age"), Warn: func(m string) { e.log.Warn(m) },
				Observe: e.logMCPCall, Commands: !c.Bool("no-commands"), WorkspaceRoot: c.String("workspace-root"),
				KeepWorkspaces: c.Bool("keep-workspaces"), WorkspaceQuota: quota, MaxSessions: c.Int("max-sessions"),
				ShowRefused: c.Bool("show-refused"), Busy: serverProcs(os.LookupEnv)})
			if err != nil {
				return e.usageError("mcp serve: %v", err)
			}
			// A signal ends the calls in flight (the SDK's Run waits for
			// them): their sandboxes are killed and removed, then every
			// warm sandbox, before the server exits.
			defer srv.Close()
			defer context.AfterFunc(ctx, srv.Close)()
			for _, w := range srv.Warnings() {
				e.log.Warn(w)
			}
			if w := c.Duration("watch"); w > 0 {
				go srv.Watch(ctx, w, func(m string) { e.log.Warn(m) })
			} else if w < 0 {
				return e.usageError("--watch: must not be negative")
			}
			addr := c.String("http")
			if addr == "" {
				// Every call's sandbox is tied to ctx: when the client
				// goes or a signal comes, running sandboxes are killed
				// and removed before Run returns.
				err := srv.MCP().Run(ctx, stdioTransport())
				if err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
					return fmt.Errorf("mcp serve: %w", err)
				}
				return nil
			}
			return serveHTTP(ctx, e, srv, addr, c.Duration("session-timeout"))
		},
	}
}

// serverGCPercent is the collector's target for a long-lived server
// (GOGC, when the environment does not set it).
const serverGCPercent = 200

// serverGC sets the Go collector of a long-lived server. Its live heap is
// small (under 1 MB between calls), but a call and the refill after it
// allocate about 3 MB: with the default GOGC=100 (a 4 MB floor) a cycle
// ran at every call and refill, often during the call (its stop-the-world
// phases and its mark worker on one of the CPUs). Measured with stamps
// in a throw-away build, 4 x 40 warm calls per setting in turns, ms:
// skillrun's own share of a call p50 1.17 / p90 2.30 / p99 7.4 at 100,
// 1.15 / 1.63 / 4.0 at 200, 1.18 / 1.58 / 5.0 at 400; the whole call's
// p90 11.5 ms at 100, 8.8 at 200. The heap may grow to three times what
// is live instead of two. GOGC in the environment (lookup) wins.
func serverGC(lookup func(string) (string, bool)) {
	if _, set := lookup("GOGC"); !set {
		debug.SetGCPercent(serverGCPercent)
	}
}

// serverProcs returns mcpserver.Options.Busy for a server: Go runs on one
// processor while the server launches nothing and runs nothing cold, and
// on its default number (the CPUs, or the cgroup's limit) while it does.
// On more processors, each goroutine the MCP SDK starts or wakes for a
// message (two per request) wakes an idle thread to run it; on a warm
// call, with nothing else to do, those threads only spin, and in a VM
// each wake-up of an idle CPU costs an interrupt. Measured on this
// project's 2-core VM, warm calls alternating between two servers, 150
// each, p50 in ms: 2.62 -> 2.50, 2.60 -> 2.32 and 2.58 -> 2.45 for a
// skill ending in os._exit, 6.26 -> 6.16 for the plain hello skill. Run
// at one processor throughout, a server took its cold launches' Go work
// one at a time: 30-32 sustained calls/s against 35-36
// (docs/performance.md). GOMAXPROCS in the environment (lookup) wins, and
// a machine of one CPU has nothing to change: nil then.
func serverProcs(lookup func(string) (string, bool)) func(bool) {
	if _, set := lookup("GOMAXPROCS"); set || goruntime.GOMAXPROCS(0) < 2 {
		return nil
	}
	goruntime.GOMAXPROCS(1)
	return func(busy bool) {
		if busy {
			goruntime.SetDefaultGOMAXPROCS()
		} else {
			goruntime.GOMAXPROCS(1)
		}
	}
}

// onceWarn logs each distinct warning once.
func onceWarn(e *env) func(string) {
	var mu sync.Mutex
	seen := map[string]bool{}
	return func(msg string) {
		mu.Lock()
		first := !seen[msg]
		seen[msg] = true
		mu.Unlock()
		if first {
			e.log.Warn(msg)
		}
	}
}

// defaultSessionTimeout is how long an HTTP session may go without a
// request before it is ended (mcp serve --session-timeout).
const defaultSessionTimeout = 30 * time.Minute

// serveHTTP serves the streamable HTTP transport on addr at /mcp, with the
// SDK's DNS-rebinding (localhost) protection on, until ctx ends. A session
// no request came for in idle (a request in flight counts) is ended: an
// HTTP client that went away without DELETE leaves no session, workspace
// or sandbox behind for longer than that.
func serveHTTP(ctx context.Context, e *env, srv *mcpserver.Server, addr string, idle time.Duration) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return e.usageError("--http %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return e.usageError("--http %q: only loopback addresses (127.0.0.1, [::1], localhost) are served", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mcp serve: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.HTTPHandler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() },
		&mcp.StreamableHTTPOptions{SessionTimeout: idle, PropagateRequestCancellation: true})))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	e.log.Infof("mcp serve: listening on http://%s/mcp", ln.Addr())
	fmt.Fprintf(e.stderr, "mcp serve: listening on http://%s/mcp\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("mcp serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}
