//go:build openshell

// The OpenShell compute driver: built into skillrun-openshell (make builds
// it beside skillrun with the openshell tag) only. skillrun itself carries
// a stub of the command that execs that binary (openshell_stub.go): the
// gRPC, protobuf and OCI image stack stay off the runtime's path (every
// runc verb containerd's shim calls, and every container's init, pays its
// binary's package initialisation).

package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	apexlog "github.com/apex/log"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"

	"github.com/skillrun/skillrun/openshell"
	pb "github.com/skillrun/skillrun/openshell/computev1"
)

// defaultOpenShellState is where sandbox bundles and workspaces persist:
// not under the (tmpfs) runtime root, so that workspaces survive reboots.
func defaultOpenShellState() string {
	if os.Geteuid() == 0 {
		return "/var/lib/skillrun/openshell"
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "skillrun", "openshell")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "skillrun", "openshell")
	}
	return filepath.Join(os.TempDir(), "skillrun-openshell-"+strconv.Itoa(os.Geteuid()))
}

func openshellCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  openshellCommandName,
		Usage: openshellUsage,
		Description: joinLines(
			`Runs OpenShell sandboxes as skillrun containers: the OpenShell gateway`,
			`connects to --socket as an external compute driver. Images come from the`,
			`OCI image layout --images; each sandbox's bundle, token and workspace live`,
			`under --state. Containers are in the global --root, so`,
			``,
			`    skillrun --root ROOT exec openshell-<sandbox-id> CMD...`,
			``,
			`runs a command in a sandbox.`),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket", Usage: "Unix socket to listen on (its directory is made 0700; required)"},
			&cli.StringFlag{Name: "supervisor-bin", Usage: "host path of OpenShell's sandbox supervisor (openshell-sandbox), mounted read-only at " + openshell.SupervisorPath + " (required)"},
			&cli.StringFlag{Name: "images", Usage: "OCI image layout directory holding the sandbox images, or an oci-archive file (a tar of one)"},
			&cli.StringFlag{Name: "state", Value: defaultOpenShellState(), Usage: "directory for sandbox bundles, tokens and workspaces"},
			&cli.StringFlag{Name: "endpoint", Usage: "gateway URL given to the supervisor (OPENSHELL_ENDPOINT; required), e.g. https://host.openshell.internal:8080"},
			&cli.StringFlag{Name: "gateway-address", Usage: "address on this host where the endpoint's host name and host.openshell.internal lead (default: the endpoint's address, or 127.0.0.1)"},
			&cli.StringFlag{Name: "tls-ca", Usage: "CA certificate the supervisor trusts for the gateway (mounted read-only at " + openshell.TLSCAPath + ")"},
			&cli.StringFlag{Name: "tls-cert", Usage: "client certificate the supervisor presents to the gateway (mounted read-only at " + openshell.TLSCertPath + ")"},
			&cli.StringFlag{Name: "tls-key", Usage: "the client certificate's key (mounted read-only at " + openshell.TLSKeyPath + ")"},
			&cli.StringFlag{Name: "tls-dir", Usage: "directory holding ca.crt and client/tls.crt, client/tls.key (openshell-gateway generate-certs) or tls.crt, tls.key: instead of --tls-ca, --tls-cert, --tls-key"},
			&cli.StringFlag{Name: "default-image", Usage: "image used when a sandbox template names none"},
			&cli.StringFlag{Name: "sandbox-log-level", Value: "info", Usage: "OPENSHELL_LOG_LEVEL when the sandbox sets none"},
			&cli.BoolFlag{Name: "host-network", Usage: "run sandboxes in the host's network namespace instead of their own behind the egress allowlist"},
		},
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 0, 0); err != nil {
				return err
			}
			return e.serveOpenShell(c)
		},
	}
}

// openshellConfig is the driver's configuration from the command line,
// without the runtime; a bad one is a usage error (exit 2).
func (e *env) openshellConfig(c *cli.Context) (openshell.Config, error) {
	for _, f := range []string{"socket", "supervisor-bin", "endpoint"} {
		if c.String(f) == "" {
			return openshell.Config{}, e.usageError("openshell-driver: --%s is required", f)
		}
	}
	cfg := openshell.Config{
		StateDir:      c.String("state"),
		ImagesDir:     c.String("images"),
		SupervisorBin: c.String("supervisor-bin"),
		Endpoint:      c.String("endpoint"),
		DefaultImage:  c.String("default-image"),
		LogLevel:      c.String("sandbox-log-level"),
		HostNetwork:   c.Bool("host-network"),
		TLS:           openshell.TLSFiles{CA: c.String("tls-ca"), Cert: c.String("tls-cert"), Key: c.String("tls-key")},
		Version:       version,
	}
	if d := c.String("tls-dir"); d != "" {
		if cfg.TLS != (openshell.TLSFiles{}) {
			return cfg, e.usageError("openshell-driver: --tls-dir or --tls-ca, --tls-cert, --tls-key, not both")
		}
		cfg.TLS = openshell.TLSDir(d)
	}
	if a := c.String("gateway-address"); a != "" {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return cfg, e.usageError("openshell-driver: --gateway-address %q: not an IP address", a)
		}
		cfg.GatewayAddress = addr
	}
	if err := openshell.CheckConfig(cfg); err != nil {
		return cfg, e.usageError("openshell-driver: %v", err)
	}
	return cfg, nil
}

// routeUmociLog sends the log of umoci (which unpacks images, logging
// through apex/log's global logger to stderr) to the driver's log: its
// progress lines at debug level, its warnings as warnings.
func (e *env) routeUmociLog() {
	apexlog.SetLevel(apexlog.DebugLevel)
	apexlog.SetHandler(apexlog.HandlerFunc(func(entry *apexlog.Entry) error {
		l := e.log.WithField("from", "umoci")
		for k, v := range entry.Fields {
			l = l.WithField(k, v)
		}
		switch {
		case entry.Level >= apexlog.ErrorLevel:
			l.Error(entry.Message)
		case entry.Level == apexlog.WarnLevel:
			l.Warn(entry.Message)
		default:
			l.Debug(entry.Message)
		}
		return nil
	}))
}

func (e *env) serveOpenShell(c *cli.Context) error {
	cfg, err := e.openshellConfig(c)
	if err != nil {
		return err
	}
	rt, err := e.engine(c)
	if err != nil {
		return err
	}
	rootless := os.Geteuid() != 0
	if _, err := exampleSpec(rootless); err != nil {
		return err
	}
	e.routeUmociLog()
	ctx, cancel := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	// The socket first: a refused socket leaves no state directory behind.
	l, err := openshell.Listen(c.String("socket"))
	if err != nil {
		return err
	}
	defer l.Close()
	cfg.Runtime = rt
	cfg.BaseSpec = func() *specs.Spec {
		s, _ := exampleSpec(rootless)
		return s
	}
	drv, warnings, err := openshell.New(ctx, cfg)
	for _, w := range warnings {
		e.log.Warn(w)
	}
	if err != nil {
		return err
	}
	unary, stream := e.rpcLogger()
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream))
	pb.RegisterComputeDriverServer(srv, drv)
	e.log.Infof("openshell-driver: serving on %s", c.String("socket"))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serve %s: %w", c.String("socket"), err)
		}
		return nil
	case <-ctx.Done():
	}
	// Watch streams never end by themselves: give unary calls a moment,
	// then cut the rest.
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		srv.Stop()
	}
	<-done
	return nil
}
