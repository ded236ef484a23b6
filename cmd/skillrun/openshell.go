package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

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
		Name:  "openshell-driver",
		Usage: "serve OpenShell's compute driver gRPC API on a Unix socket",
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
			&cli.StringFlag{Name: "socket", Required: true, Usage: "Unix socket to listen on (its directory is made 0700)"},
			&cli.StringFlag{Name: "supervisor-bin", Usage: "host path of OpenShell's sandbox supervisor, mounted read-only at " + openshell.SupervisorPath},
			&cli.StringFlag{Name: "images", Usage: "OCI image layout directory holding the sandbox images, or an oci-archive file (a tar of one)"},
			&cli.StringFlag{Name: "state", Value: defaultOpenShellState(), Usage: "directory for sandbox bundles, tokens and workspaces"},
			&cli.StringFlag{Name: "endpoint", Usage: "gateway URL given to the supervisor (OPENSHELL_ENDPOINT)"},
			&cli.StringFlag{Name: "default-image", Usage: "image used when a sandbox template names none"},
			&cli.StringFlag{Name: "sandbox-log-level", Value: "info", Usage: "OPENSHELL_LOG_LEVEL when the sandbox sets none"},
			&cli.BoolFlag{Name: "host-network", Usage: "run sandboxes in the host's network namespace (they get only loopback otherwise)"},
		},
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 0, 0); err != nil {
				return err
			}
			return e.serveOpenShell(c)
		},
	}
}

func (e *env) serveOpenShell(c *cli.Context) error {
	rt, err := e.engine(c)
	if err != nil {
		return err
	}
	rootless := os.Geteuid() != 0
	if _, err := exampleSpec(rootless); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	// The socket first: a refused socket leaves no state directory behind.
	l, err := openshell.Listen(c.String("socket"))
	if err != nil {
		return err
	}
	defer l.Close()
	drv, warnings, err := openshell.New(ctx, openshell.Config{
		Runtime:       rt,
		StateDir:      c.String("state"),
		ImagesDir:     c.String("images"),
		SupervisorBin: c.String("supervisor-bin"),
		Endpoint:      c.String("endpoint"),
		DefaultImage:  c.String("default-image"),
		LogLevel:      c.String("sandbox-log-level"),
		HostNetwork:   c.Bool("host-network"),
		BaseSpec: func() *specs.Spec {
			s, _ := exampleSpec(rootless)
			return s
		},
		Version: version,
	})
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
