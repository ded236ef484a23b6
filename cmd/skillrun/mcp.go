package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"github.com/skillrun/skillrun/mcpserver"
)

func mcpCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve skills to agents over the Model Context Protocol",
		Subcommands: []*cli.Command{
			mcpServeCommand(e),
		},
	}
}

func mcpServeCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve one MCP tool per skill; each call runs in a fresh sandbox",
		Description: `Serves over stdio (the default: an MCP client starts skillrun as its
server), or streamable HTTP at /mcp with --http ADDR (localhost protection
on: a request through a loopback address must name a loopback Host).
The policy flags are the operator's grants, the same for every call; a
call only supplies the skill's input. Skills added, changed or removed in
the --skills folders update the tool list (checked every --rescan).
stdout belongs to the MCP protocol with stdio: logs go to stderr or --log.`,
		Flags: append([]cli.Flag{
			&cli.StringSliceFlag{Name: "skills", Usage: "a skill folder, or a folder searched for skills (repeatable)", Required: true},
			&cli.StringFlag{Name: "http", Usage: "serve streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio"},
			&cli.DurationFlag{Name: "rescan", Value: 2 * time.Second, Usage: "how often the skill folders are checked for changes (0: never)"},
		}, policyFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return e.usageError("mcp serve: unexpected argument %q (skills come from --skills)", c.Args().First())
			}
			if c.IsSet("rescan") && c.Duration("rescan") < 0 {
				return e.usageError("--rescan: must not be negative")
			}
			opts, err := e.policyOptions(c)
			if err != nil {
				return err
			}
			rt, err := e.skillEngine(c)
			if err != nil {
				return err
			}
			srv, err := mcpserver.New(mcpserver.Config{
				Dirs:    c.StringSlice("skills"),
				Runtime: rt,
				Options: opts,
				Version: version,
				Warn:    func(m string) { e.log.Warn(m) },
			})
			if err != nil {
				return e.usageError("mcp serve: %v", err)
			}
			e.log.Infof("mcp serve: %d tool(s): %v", len(srv.Tools()), srv.Tools())
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			if d := c.Duration("rescan"); d > 0 {
				go rescan(ctx, srv, d, e)
			}
			if addr := c.String("http"); addr != "" {
				return serveHTTP(ctx, srv, addr, e)
			}
			err = srv.MCP().Run(ctx, &mcp.StdioTransport{})
			if err != nil && ctx.Err() == nil && !errors.Is(err, mcp.ErrConnectionClosed) {
				return fmt.Errorf("mcp serve: %w", err)
			}
			return nil
		},
	}
}

// rescan reloads the skill folders every d until ctx ends.
func rescan(ctx context.Context, srv *mcpserver.Server, d time.Duration, e *env) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := srv.Reload(); err != nil {
				e.log.Warn(err.Error())
			}
		}
	}
}

// serveHTTP serves streamable HTTP on addr at /mcp until ctx ends. The
// address it listens on is logged (port 0 picks one).
func serveHTTP(ctx context.Context, srv *mcpserver.Server, addr string, e *env) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() }, nil))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	e.log.Infof("mcp serve: streamable HTTP on http://%s/mcp", l.Addr())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("--http: %w", err)
	}
	return nil
}
