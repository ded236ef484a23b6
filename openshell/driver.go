package openshell

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	ispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	pb "github.com/skillrun/skillrun/openshell/computev1"
	"github.com/skillrun/skillrun/runtime"
)

// Paths and names inside a sandbox that OpenShell's supervisor expects
// (the same as OpenShell's Docker and Podman drivers use).
const (
	// SupervisorPath is where the supervisor binary is bind-mounted
	// read-only; it is the container's entrypoint.
	SupervisorPath = "/opt/openshell/bin/openshell-sandbox"
	// TokenPath is where the sandbox's gateway token file is mounted.
	TokenPath = "/etc/openshell/auth/sandbox.jwt"
	// DefaultWorkspaceRoot is the workspace of an image without WorkingDir.
	DefaultWorkspaceRoot = "/sandbox"
	// SSHSocketPath is the supervisor's SSH control socket in the sandbox.
	SSHSocketPath = "/run/openshell/ssh.sock"
	// supervisorSearchPath is the PATH the supervisor always gets.
	supervisorSearchPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// ContainerPrefix starts the container ID of every sandbox.
	ContainerPrefix = "openshell-"
)

// Config configures a Driver.
type Config struct {
	// Runtime creates the containers. Its root is where `skillrun exec`
	// finds them (skillrun --root ROOT exec openshell-ID ...).
	Runtime runtime.Runtime
	// StateDir holds one directory per sandbox (record, bundle, token,
	// workspace); created 0700.
	StateDir string
	// ImagesDir is the OCI image layout (index.json, blobs/) the template
	// images are looked up in, or an oci-archive file (a tar of one),
	// unpacked into StateDir by New.
	ImagesDir string
	// SupervisorBin is the host path of OpenShell's sandbox supervisor
	// (required: without it no sandbox can start).
	SupervisorBin string
	// Endpoint is the gateway URL handed to the supervisor
	// (OPENSHELL_ENDPOINT; required): https://NAME:PORT, or http:// with
	// HostNetwork. An IP address in it is replaced by
	// host.openshell.internal (as the Docker driver does), and becomes
	// the GatewayAddress.
	Endpoint string
	// GatewayAddress is where, on the driver's host, connections to the
	// endpoint's name and to host.openshell.internal go (the egress
	// relay's --resolve mapping; /etc/hosts with HostNetwork). Default:
	// the endpoint's address, or 127.0.0.1.
	GatewayAddress netip.Addr
	// TLS is the supervisor's client TLS material, mounted read-only for
	// an https:// endpoint.
	TLS TLSFiles
	// DefaultImage is used when a template names no image, and reported
	// by GetCapabilities.
	DefaultImage string
	// LogLevel is OPENSHELL_LOG_LEVEL when the sandbox spec sets none.
	LogLevel string
	// HostNetwork runs sandboxes in the host's network namespace, where
	// the supervisor's NET_ADMIN work acts on the host's network. Without
	// it (the default) each sandbox has its own network namespace whose
	// only way out is skillrun's egress allowlist, granting the gateway's
	// endpoint alone.
	HostNetwork bool
	// BaseSpec returns the OCI configuration every sandbox's config.json
	// starts from (the runtime's `spec` default).
	BaseSpec func() *specs.Spec
	// Version is reported by GetCapabilities.
	Version string
	// PollInterval is how often WatchSandboxes looks for changes nobody
	// announced (a container exiting); default 500ms.
	PollInterval time.Duration
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL;
	// default 10s.
	StopTimeout time.Duration
}

// Driver implements OpenShell's ComputeDriver service on a runtime.Runtime.
// It is safe for concurrent use.
type Driver struct {
	pb.UnimplementedComputeDriverServer
	cfg Config
	gw  *gateway

	mu    sync.Mutex
	locks map[string]*sync.RWMutex // per sandbox ID
	// changed is closed (and replaced) to make every watcher look for
	// changes nobody announced (a container exiting).
	changed chan struct{}
	// watchers receive the driver's own transitions, as they happen.
	watchers map[*watchQueue]struct{}
	// unpack unpacks an image of the layout into a rootfs: unpackImage
	// (tests may stand in for it).
	unpack func(ctx context.Context, layoutDir, ref, rootfs string) (*ispec.ImageConfig, error)
}

// New checks cfg, creates the state directory and reconciles it with the
// runtime: sandboxes whose creation or deletion a previous driver did not
// finish are removed, containers named like a sandbox but without one are
// deleted. It returns warnings about what it cleaned up.
func New(ctx context.Context, cfg Config) (*Driver, []string, error) {
	if cfg.Runtime == nil {
		return nil, nil, errors.New("openshell driver: no runtime")
	}
	if cfg.StateDir == "" {
		return nil, nil, errors.New("openshell driver: state directory is empty")
	}
	gw, err := checkConfig(&cfg)
	if err != nil {
		return nil, nil, err
	}
	if cfg.BaseSpec == nil {
		return nil, nil, errors.New("openshell driver: no base spec")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 500 * time.Millisecond
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 10 * time.Second
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "info"
	}
	for _, d := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "sandboxes"), filepath.Join(cfg.StateDir, "workspaces")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, nil, fmt.Errorf("state directory: %w", err)
		}
	}
	if cfg.ImagesDir != "" {
		layout, err := imageLayout(cfg.ImagesDir, cfg.StateDir)
		if err != nil {
			return nil, nil, err
		}
		cfg.ImagesDir = layout
	}
	d := &Driver{cfg: cfg, gw: gw, locks: map[string]*sync.RWMutex{}, changed: make(chan struct{}), watchers: map[*watchQueue]struct{}{}, unpack: unpackImage}
	warnings, err := d.reconcile(ctx)
	return d, warnings, err
}

// CheckConfig checks what the operator configures: the supervisor binary,
// the gateway's endpoint and address, the TLS files. New checks it too;
// an embedding program calls it first to tell a bad configuration from a
// failure to start.
func CheckConfig(cfg Config) error {
	_, err := checkConfig(&cfg)
	return err
}

func checkConfig(cfg *Config) (*gateway, error) {
	if cfg.SupervisorBin == "" {
		return nil, errors.New("openshell driver: no supervisor binary (--supervisor-bin)")
	}
	fi, err := os.Stat(cfg.SupervisorBin)
	if err != nil {
		return nil, fmt.Errorf("supervisor binary: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("supervisor binary %s is not an executable file", cfg.SupervisorBin)
	}
	return newGateway(cfg)
}

// ContainerID is the container that runs sandbox id.
func ContainerID(id string) string { return ContainerPrefix + id }

// GetCapabilities reports the driver's name, version and default image,
// and that the gateway manages the sandboxes' lifecycle (as with the
// Docker, Podman and VM drivers): it stops every running sandbox when it
// shuts down and starts them again when it starts, which also brings back
// a sandbox whose container vanished (a host reboot).
func (d *Driver) GetCapabilities(context.Context, *pb.GetCapabilitiesRequest) (*pb.GetCapabilitiesResponse, error) {
	return &pb.GetCapabilitiesResponse{
		DriverName:              "skillrun",
		DriverVersion:           d.cfg.Version,
		DefaultImage:            d.cfg.DefaultImage,
		GatewayManagesLifecycle: true,
	}, nil
}

// GetGatewayListenerRequirements asks the gateway to listen where its
// sandboxes reach it: its loopback listener when the gateway address is
// 127.0.0.1 (the default), that exact address on the endpoint's port when
// it is another address of this host, nothing for another host.
func (d *Driver) GetGatewayListenerRequirements(context.Context, *pb.GetGatewayListenerRequirementsRequest) (*pb.GetGatewayListenerRequirementsResponse, error) {
	return &pb.GetGatewayListenerRequirementsResponse{Requirements: d.gw.listenerRequirements()}, nil
}

// ValidateSandboxCreate checks a create request as CreateSandbox does:
// InvalidArgument (a malformed request) or FailedPrecondition (one this
// driver cannot run) names the field at fault.
func (d *Driver) ValidateSandboxCreate(ctx context.Context, req *pb.ValidateSandboxCreateRequest) (*pb.ValidateSandboxCreateResponse, error) {
	if err := d.validate(ctx, req.GetSandbox()); err != nil {
		return nil, err
	}
	return &pb.ValidateSandboxCreateResponse{}, nil
}

// CreateSandbox unpacks the image into a new bundle and starts the
// sandbox's container. AlreadyExists when the ID is taken; on failure
// nothing is left behind.
func (d *Driver) CreateSandbox(ctx context.Context, req *pb.CreateSandboxRequest) (*pb.CreateSandboxResponse, error) {
	if err := d.createSandbox(ctx, req.GetSandbox()); err != nil {
		return nil, err
	}
	return &pb.CreateSandboxResponse{}, nil
}

// GetSandbox returns the observed state of one sandbox; NotFound if none.
func (d *Driver) GetSandbox(ctx context.Context, req *pb.GetSandboxRequest) (*pb.GetSandboxResponse, error) {
	sb, err := d.get(ctx, req.GetSandboxId(), req.GetSandboxName())
	if err != nil {
		return nil, err
	}
	return &pb.GetSandboxResponse{Sandbox: sb}, nil
}

// ListSandboxes returns the observed state of every sandbox.
func (d *Driver) ListSandboxes(ctx context.Context, _ *pb.ListSandboxesRequest) (*pb.ListSandboxesResponse, error) {
	sbs, err := d.list(ctx, true)
	if err != nil {
		return nil, err
	}
	return &pb.ListSandboxesResponse{Sandboxes: sbs}, nil
}

// StopSandbox stops the container (SIGTERM, SIGKILL after the timeout)
// and removes it, keeping the bundle and workspace. Idempotent.
func (d *Driver) StopSandbox(ctx context.Context, req *pb.StopSandboxRequest) (*pb.StopSandboxResponse, error) {
	if err := d.stopSandbox(ctx, req.GetSandboxId(), req.GetSandboxName()); err != nil {
		return nil, err
	}
	return &pb.StopSandboxResponse{}, nil
}

// StartSandbox re-creates a stopped sandbox's container from its retained
// bundle. Idempotent: a running sandbox is left alone.
func (d *Driver) StartSandbox(ctx context.Context, req *pb.StartSandboxRequest) (*pb.StartSandboxResponse, error) {
	if err := d.startSandbox(ctx, req.GetSandboxId(), req.GetSandboxName()); err != nil {
		return nil, err
	}
	return &pb.StartSandboxResponse{}, nil
}

// DeleteSandbox removes the container, bundle, token and workspace.
// Idempotent: deleting a sandbox that does not exist answers
// deleted=false.
func (d *Driver) DeleteSandbox(ctx context.Context, req *pb.DeleteSandboxRequest) (*pb.DeleteSandboxResponse, error) {
	deleted, err := d.deleteSandbox(ctx, req.GetSandboxId(), req.GetSandboxName())
	if err != nil {
		return nil, err
	}
	return &pb.DeleteSandboxResponse{Deleted: deleted}, nil
}

// WatchSandboxes sends a snapshot of every sandbox, then one event per
// change: a new snapshot when a sandbox's observed state changes, a
// deleted event when it is gone.
//
// Two sources feed a stream, through one FIFO: every state the driver's
// own mutations pass through (published while the mutation holds the
// sandbox's lock: Starting, BackendReady, ContainerExited after a stop,
// Deleting, deleted), and a look at every sandbox no mutation holds, at
// start, when woken (a container's init exited) and every PollInterval,
// for changes from outside (a container exiting or paused). Changes from
// outside that come and go between two looks are not seen.
func (d *Driver) WatchSandboxes(_ *pb.WatchSandboxesRequest, stream pb.ComputeDriver_WatchSandboxesServer) error {
	return d.watch(stream.Context(), stream.Send)
}

// EnsureWorkspace creates the workspace's directory. Idempotent.
func (d *Driver) EnsureWorkspace(_ context.Context, req *pb.EnsureWorkspaceRequest) (*pb.EnsureWorkspaceResponse, error) {
	ws := req.GetWorkspace()
	if err := validateWorkspace(ws); err != nil {
		return nil, err
	}
	if err := d.ensureWorkspace(ws); err != nil {
		return nil, err
	}
	return &pb.EnsureWorkspaceResponse{}, nil
}

// DeleteWorkspace removes the workspace's directory; FailedPrecondition
// while sandboxes of the workspace exist. Idempotent.
func (d *Driver) DeleteWorkspace(ctx context.Context, req *pb.DeleteWorkspaceRequest) (*pb.DeleteWorkspaceResponse, error) {
	ws := req.GetWorkspace()
	if err := validateWorkspace(ws); err != nil {
		return nil, err
	}
	if err := d.deleteWorkspace(ctx, ws); err != nil {
		return nil, err
	}
	return &pb.DeleteWorkspaceResponse{}, nil
}
