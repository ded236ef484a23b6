package openshell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/skillrun/skillrun/internal/safefs"
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

// Condition reasons, as OpenShell's Docker driver reports them.
const (
	reasonReady    = "BackendReady"
	reasonStarting = "Starting"
	reasonExited   = "ContainerExited"
	reasonPaused   = "ContainerPaused"
	reasonDeleting = "Deleting"
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
	// SupervisorBin is the host path of OpenShell's sandbox supervisor.
	SupervisorBin string
	// Endpoint is the gateway URL handed to the supervisor
	// (OPENSHELL_ENDPOINT).
	Endpoint string
	// DefaultImage is used when a template names no image, and reported
	// by GetCapabilities.
	DefaultImage string
	// LogLevel is OPENSHELL_LOG_LEVEL when the sandbox spec sets none.
	LogLevel string
	// HostNetwork runs sandboxes in the host's network namespace (needed
	// for the supervisor to reach a gateway on the host: skillrun sets up
	// no container networking). Without it a sandbox has only loopback.
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

	mu    sync.Mutex
	locks map[string]*sync.Mutex // per sandbox ID
	// changed is closed (and replaced) to make every watcher look for
	// changes nobody announced (a container exiting).
	changed chan struct{}
	// watchers receive the driver's own transitions, as they happen.
	watchers map[*watchQueue]struct{}
}

// watchItem is one observed state of a sandbox; sandbox nil means gone.
type watchItem struct {
	id      string
	sandbox *pb.DriverSandbox
}

// watchQueue is one WatchSandboxes stream's FIFO of observed states, in
// the order they were observed.
type watchQueue struct {
	mu    sync.Mutex
	items []watchItem
	wake  chan struct{} // capacity 1
}

func (q *watchQueue) push(it watchItem) {
	q.mu.Lock()
	q.items = append(q.items, it)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *watchQueue) take() []watchItem {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

// record is what the driver keeps on disk about a sandbox.
type record struct {
	// Sandbox is the create request's DriverSandbox (protojson), with the
	// token and status removed.
	Sandbox json.RawMessage `json:"sandbox"`
	// Stopped is true after StopSandbox, until StartSandbox.
	Stopped bool `json:"stopped,omitempty"`
	// Deleting is true once DeleteSandbox began.
	Deleting bool `json:"deleting,omitempty"`
	// Ready is false until the bundle is complete and the container was
	// first started.
	Ready bool `json:"ready,omitempty"`
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
	if cfg.SupervisorBin != "" {
		fi, err := os.Stat(cfg.SupervisorBin)
		if err != nil {
			return nil, nil, fmt.Errorf("supervisor binary: %w", err)
		}
		if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			return nil, nil, fmt.Errorf("supervisor binary %s is not an executable file", cfg.SupervisorBin)
		}
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
	d := &Driver{cfg: cfg, locks: map[string]*sync.Mutex{}, changed: make(chan struct{}), watchers: map[*watchQueue]struct{}{}}
	warnings, err := d.reconcile(ctx)
	return d, warnings, err
}

// reconcile removes what a previous driver left half done.
func (d *Driver) reconcile(ctx context.Context) ([]string, error) {
	var warnings []string
	ents, err := os.ReadDir(d.sandboxesDir())
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, e := range ents {
		id := e.Name()
		rec, err := d.readRecord(id)
		switch {
		case err != nil || !rec.Ready || rec.Deleting:
			if err := d.destroy(ctx, id); err != nil {
				warnings = append(warnings, fmt.Sprintf("sandbox %s: cleaning up an unfinished create or delete: %v", id, err))
			} else {
				warnings = append(warnings, fmt.Sprintf("sandbox %s: removed an unfinished create or delete", id))
			}
		default:
			known[id] = true
		}
	}
	states, _, err := d.cfg.Runtime.List(ctx)
	if err != nil {
		return warnings, fmt.Errorf("list containers: %w", err)
	}
	for _, st := range states {
		id, ok := strings.CutPrefix(st.ID, ContainerPrefix)
		if !ok || known[id] {
			continue
		}
		if err := d.cfg.Runtime.Delete(ctx, st.ID, true); err != nil && !errors.Is(err, runtime.ErrNotExist) {
			warnings = append(warnings, fmt.Sprintf("container %s without a sandbox: %v", st.ID, err))
		} else {
			warnings = append(warnings, fmt.Sprintf("deleted container %s: it has no sandbox", st.ID))
		}
	}
	return warnings, nil
}

func (d *Driver) sandboxesDir() string        { return filepath.Join(d.cfg.StateDir, "sandboxes") }
func (d *Driver) sandboxDir(id string) string { return filepath.Join(d.sandboxesDir(), id) }
func (d *Driver) recordPath(id string) string { return filepath.Join(d.sandboxDir(id), "sandbox.json") }
func (d *Driver) bundleDir(id string) string  { return filepath.Join(d.sandboxDir(id), "bundle") }

// ContainerID is the container that runs sandbox id.
func ContainerID(id string) string { return ContainerPrefix + id }

// mutex returns the mutex of sandbox id, made on first use.
func (d *Driver) mutex(id string) *sync.Mutex {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.locks[id]
	if !ok {
		l = &sync.Mutex{}
		d.locks[id] = l
	}
	return l
}

// lock serialises the mutations of one sandbox.
func (d *Driver) lock(id string) func() {
	l := d.mutex(id)
	l.Lock()
	return l.Unlock
}

// tryLock is lock without waiting: ok is false while another goroutine
// changes the sandbox.
func (d *Driver) tryLock(id string) (unlock func(), ok bool) {
	l := d.mutex(id)
	if !l.TryLock() {
		return nil, false
	}
	return l.Unlock, true
}

// publish hands the current state of sandbox id (gone if it has no
// record) to every watcher. The caller holds id's lock, so every state a
// mutation passes through (Starting, Deleting) reaches every stream, in
// order: watchers only observe a sandbox themselves while they hold its
// lock (see WatchSandboxes).
func (d *Driver) publish(id string) {
	sb, err := d.snapshot(context.Background(), id, false)
	if err != nil {
		sb = nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for q := range d.watchers {
		q.push(watchItem{id: id, sandbox: sb})
	}
}

// notify makes every watcher look for changes now.
func (d *Driver) notify() {
	d.mu.Lock()
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
}

func (d *Driver) changes() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

func (d *Driver) readRecord(id string) (*record, error) {
	data, err := os.ReadFile(d.recordPath(id))
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", d.recordPath(id), err)
	}
	return &r, nil
}

func (d *Driver) writeRecord(id string, r *record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return safefs.WriteFileDurable(d.recordPath(id), data, 0o600)
}

// sandboxOf decodes a record's sandbox.
func (r *record) sandboxOf() (*pb.DriverSandbox, error) {
	var sb pb.DriverSandbox
	if err := protojson.Unmarshal(r.Sandbox, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// GetCapabilities reports the driver's name, version and default image.
func (d *Driver) GetCapabilities(context.Context, *pb.GetCapabilitiesRequest) (*pb.GetCapabilitiesResponse, error) {
	return &pb.GetCapabilitiesResponse{
		DriverName:    "skillrun",
		DriverVersion: d.cfg.Version,
		DefaultImage:  d.cfg.DefaultImage,
	}, nil
}

// GetGatewayListenerRequirements asks for no extra gateway listener.
func (d *Driver) GetGatewayListenerRequirements(context.Context, *pb.GetGatewayListenerRequirementsRequest) (*pb.GetGatewayListenerRequirementsResponse, error) {
	return &pb.GetGatewayListenerRequirementsResponse{}, nil
}

// idPattern is what a sandbox ID may be: it becomes part of a container ID
// and a directory name.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// envKey is a valid environment variable name (no '=' or NUL).
var envKey = regexp.MustCompile(`^[^=\x00]+$`)

func invalid(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
}

// validate checks a create request without touching anything.
func (d *Driver) validate(ctx context.Context, sb *pb.DriverSandbox) error {
	if sb == nil {
		return invalid("sandbox", "is required")
	}
	if !idPattern.MatchString(sb.GetId()) {
		return invalid("sandbox.id", "%q is not a valid sandbox ID (letters, digits, '_', '.', '-'; at most 128)", sb.GetId())
	}
	if sb.GetName() == "" {
		return invalid("sandbox.name", "is required")
	}
	spec := sb.GetSpec()
	if spec.GetResourceRequirements().GetGpu() != nil {
		return invalid("sandbox.spec.resource_requirements.gpu", "GPUs are not supported by the skillrun driver")
	}
	for k, v := range spec.GetEnvironment() {
		if !envKey.MatchString(k) || strings.ContainsRune(v, 0) {
			return invalid("sandbox.spec.environment", "invalid variable %q", k)
		}
	}
	tmpl := spec.GetTemplate()
	for k, v := range tmpl.GetEnvironment() {
		if !envKey.MatchString(k) || strings.ContainsRune(v, 0) {
			return invalid("sandbox.spec.template.environment", "invalid variable %q", k)
		}
	}
	for i, a := range spec.GetCommand() {
		if strings.ContainsRune(a, 0) {
			return invalid(fmt.Sprintf("sandbox.spec.command[%d]", i), "contains a NUL byte")
		}
	}
	if len(spec.GetCommand()) > 0 && spec.GetCommand()[0] == "" {
		return invalid("sandbox.spec.command[0]", "is empty")
	}
	if _, err := d.resources(tmpl.GetResources()); err != nil {
		return err
	}
	image := d.imageOf(sb)
	if image == "" {
		return invalid("sandbox.spec.template.image", "is required (the driver has no default image)")
	}
	if d.cfg.ImagesDir == "" {
		return invalid("sandbox.spec.template.image", "%q: the driver has no image layout (--images)", image)
	}
	if err := checkImage(ctx, d.cfg.ImagesDir, image); err != nil {
		if errors.Is(err, errImageNotFound) {
			return invalid("sandbox.spec.template.image", "%q is not in the image layout %s", image, d.cfg.ImagesDir)
		}
		return invalid("sandbox.spec.template.image", "%q: %v", image, err)
	}
	return nil
}

func (d *Driver) imageOf(sb *pb.DriverSandbox) string {
	if img := sb.GetSpec().GetTemplate().GetImage(); img != "" {
		return img
	}
	return d.cfg.DefaultImage
}

// resources turns the template's limits into OCI resources. Requests are
// checked but not enforced (a single host has nothing to schedule).
func (d *Driver) resources(r *pb.DriverResourceRequirements) (*specs.LinuxResources, error) {
	out := &specs.LinuxResources{}
	check := func(field, v string, parse func(string) (int64, error)) (int64, error) {
		if v == "" {
			return 0, nil
		}
		n, err := parse(v)
		if err != nil {
			return 0, invalid("sandbox.spec.template.resources."+field, "%v", err)
		}
		return n, nil
	}
	if _, err := check("cpu_request", r.GetCpuRequest(), parseMilliCPU); err != nil {
		return nil, err
	}
	if _, err := check("memory_request", r.GetMemoryRequest(), parseBytes); err != nil {
		return nil, err
	}
	milli, err := check("cpu_limit", r.GetCpuLimit(), parseMilliCPU)
	if err != nil {
		return nil, err
	}
	if milli > 0 {
		period := uint64(100000)
		quota := milli * 100
		out.CPU = &specs.LinuxCPU{Period: &period, Quota: &quota}
	}
	mem, err := check("memory_limit", r.GetMemoryLimit(), parseBytes)
	if err != nil {
		return nil, err
	}
	if mem > 0 {
		out.Memory = &specs.LinuxMemory{Limit: &mem}
	}
	return out, nil
}

// ValidateSandboxCreate checks a create request: InvalidArgument names the
// field at fault.
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
	sb := req.GetSandbox()
	if err := d.validate(ctx, sb); err != nil {
		return nil, err
	}
	id := sb.GetId()
	unlock := d.lock(id)
	defer unlock()
	if _, err := os.Lstat(d.sandboxDir(id)); err == nil {
		return nil, status.Errorf(codes.AlreadyExists, "sandbox %s already exists", id)
	}
	if err := d.create(ctx, sb); err != nil {
		// Nothing left behind: no container, no directory.
		_ = d.destroy(context.WithoutCancel(ctx), id)
		d.publish(id)
		if status.Code(err) != codes.Unknown {
			return nil, err
		}
		return nil, status.Errorf(codes.Internal, "create sandbox %s: %v", id, err)
	}
	d.publish(id)
	return &pb.CreateSandboxResponse{}, nil
}

func (d *Driver) create(ctx context.Context, sb *pb.DriverSandbox) error {
	id := sb.GetId()
	dir := d.sandboxDir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	kept := proto.Clone(sb).(*pb.DriverSandbox)
	kept.Status = nil
	if kept.Spec != nil {
		kept.Spec.SandboxToken = ""
	}
	raw, err := protojson.Marshal(kept)
	if err != nil {
		return err
	}
	rec := &record{Sandbox: raw}
	if err := d.writeRecord(id, rec); err != nil {
		return err
	}
	d.publish(id) // Starting
	bundle := d.bundleDir(id)
	if err := os.Mkdir(bundle, 0o700); err != nil {
		return err
	}
	imgCfg, err := unpackImage(ctx, d.cfg.ImagesDir, d.imageOf(sb), filepath.Join(bundle, "rootfs"))
	if err != nil {
		return err
	}
	spec, err := d.buildSpec(sb, imgCfg)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(spec, "", "\t")
	if err != nil {
		return err
	}
	if err := safefs.WriteFileDurable(filepath.Join(bundle, "config.json"), data, 0o600); err != nil {
		return err
	}
	if err := d.start(ctx, id); err != nil {
		return err
	}
	rec.Ready = true
	return d.writeRecord(id, rec)
}

// start runs the sandbox's container from its bundle, detached, removing
// a stopped container of the same ID first.
func (d *Driver) start(ctx context.Context, id string) error {
	cid := ContainerID(id)
	st, err := d.cfg.Runtime.State(ctx, cid)
	switch {
	case err == nil && (st.Status == runtime.StatusRunning || st.Status == runtime.StatusPaused):
		return nil
	case err == nil:
		if err := d.cfg.Runtime.Delete(ctx, cid, true); err != nil && !errors.Is(err, runtime.ErrNotExist) {
			return fmt.Errorf("remove old container: %w", err)
		}
	case !errors.Is(err, runtime.ErrNotExist):
		return err
	}
	// The container's output (the supervisor's log) is appended to
	// console.log next to the bundle.
	logf, err := os.OpenFile(filepath.Join(d.sandboxDir(id), "console.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	if _, err := d.cfg.Runtime.Run(ctx, cid, runtime.RunOpts{
		CreateOpts: runtime.CreateOpts{Bundle: d.bundleDir(id), Stdio: runtime.Stdio{Stdout: logf, Stderr: logf}},
		Detach:     true,
	}); err != nil {
		return fmt.Errorf("start container %s: %w", cid, err)
	}
	// The driver is the container init's parent: reap it when it exits
	// so that it does not linger as a zombie.
	if st, err := d.cfg.Runtime.State(ctx, cid); err == nil && st.Pid > 0 {
		go func(pid int) {
			var ws syscall.WaitStatus
			for {
				_, err := syscall.Wait4(pid, &ws, 0, nil)
				if err != syscall.EINTR {
					break
				}
			}
			d.notify()
		}(st.Pid)
	}
	return nil
}

// destroy removes the container and the directory of sandbox id.
func (d *Driver) destroy(ctx context.Context, id string) error {
	var errs []error
	if err := d.cfg.Runtime.Delete(ctx, ContainerID(id), true); err != nil && !errors.Is(err, runtime.ErrNotExist) {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(d.sandboxDir(id)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// find returns the ID of the sandbox a request names (by ID, or by name).
func (d *Driver) find(id, name string) (string, error) {
	if id == "" && name == "" {
		return "", status.Error(codes.InvalidArgument, "sandbox_id or sandbox_name is required")
	}
	if id != "" {
		if !idPattern.MatchString(id) {
			return "", invalid("sandbox_id", "%q is not a valid sandbox ID", id)
		}
		if _, err := os.Lstat(d.recordPath(id)); err != nil {
			return "", status.Errorf(codes.NotFound, "sandbox %s not found", id)
		}
		return id, nil
	}
	sbs, err := d.list(context.Background(), false)
	if err != nil {
		return "", err
	}
	for _, sb := range sbs {
		if sb.GetName() == name {
			return sb.GetId(), nil
		}
	}
	return "", status.Errorf(codes.NotFound, "sandbox named %q not found", name)
}

// snapshot is the observed state of sandbox id.
func (d *Driver) snapshot(ctx context.Context, id string, withSpec bool) (*pb.DriverSandbox, error) {
	rec, err := d.readRecord(id)
	if err != nil {
		return nil, err
	}
	sb, err := rec.sandboxOf()
	if err != nil {
		return nil, err
	}
	if !withSpec {
		sb.Spec = nil
	}
	cond := &pb.DriverCondition{Type: "Ready", Status: "False"}
	st := &pb.DriverSandboxStatus{SandboxName: sb.GetName(), Conditions: []*pb.DriverCondition{cond}}
	sb.Status = st
	cs, err := d.cfg.Runtime.State(ctx, ContainerID(id))
	if err == nil {
		st.InstanceId = cs.ID
	}
	switch {
	case rec.Deleting:
		cond.Reason, cond.Message, st.Deleting = reasonDeleting, "Sandbox is being deleted", true
	case err != nil && !rec.Ready:
		cond.Reason, cond.Message = reasonStarting, "Sandbox is being provisioned"
	case err != nil && rec.Stopped:
		cond.Reason, cond.Message = reasonExited, "Sandbox is stopped"
	case err != nil:
		cond.Reason, cond.Message = reasonExited, "Container does not exist"
	case cs.Status == runtime.StatusRunning:
		cond.Status, cond.Reason, cond.Message = "True", reasonReady, "Container is running"
	case cs.Status == runtime.StatusPaused:
		cond.Reason, cond.Message = reasonPaused, "Container is paused"
	case cs.Status == runtime.StatusStopped:
		cond.Reason, cond.Message = reasonExited, "Container exited"
	default: // creating, created
		cond.Reason, cond.Message = reasonStarting, "Container "+cs.Status
	}
	return sb, nil
}

// list returns a snapshot of every sandbox, sorted by ID.
func (d *Driver) list(ctx context.Context, withSpec bool) ([]*pb.DriverSandbox, error) {
	ents, err := os.ReadDir(d.sandboxesDir())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "list sandboxes: %v", err)
	}
	var out []*pb.DriverSandbox
	for _, e := range ents {
		sb, err := d.snapshot(ctx, e.Name(), withSpec)
		if err != nil {
			continue // being created or removed
		}
		out = append(out, sb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetId() < out[j].GetId() })
	return out, nil
}

// GetSandbox returns the observed state of one sandbox; NotFound if none.
func (d *Driver) GetSandbox(ctx context.Context, req *pb.GetSandboxRequest) (*pb.GetSandboxResponse, error) {
	id, err := d.find(req.GetSandboxId(), req.GetSandboxName())
	if err != nil {
		return nil, err
	}
	sb, err := d.snapshot(ctx, id, true)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "sandbox %s not found", id)
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
	id, rec, unlock, err := d.lockRecord(req.GetSandboxId(), req.GetSandboxName())
	if err != nil {
		return nil, err
	}
	defer unlock()
	if rec.Deleting {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %s is being deleted", id)
	}
	rec.Stopped = true
	if err := d.writeRecord(id, rec); err != nil {
		return nil, status.Errorf(codes.Internal, "stop sandbox %s: %v", id, err)
	}
	if err := d.stopContainer(ctx, ContainerID(id)); err != nil {
		return nil, status.Errorf(codes.Internal, "stop sandbox %s: %v", id, err)
	}
	d.publish(id)
	return &pb.StopSandboxResponse{}, nil
}

// lockRecord finds a sandbox by id or name, takes its lock and reads its
// record; NotFound when either is missing. The caller calls unlock.
func (d *Driver) lockRecord(sid, name string) (string, *record, func(), error) {
	id, err := d.find(sid, name)
	if err != nil {
		return "", nil, nil, err
	}
	unlock := d.lock(id)
	rec, err := d.readRecord(id)
	if err != nil {
		unlock()
		return "", nil, nil, status.Errorf(codes.NotFound, "sandbox %s not found", id)
	}
	return id, rec, unlock, nil
}

// stopContainer stops and deletes a container; a missing one is fine.
func (d *Driver) stopContainer(ctx context.Context, cid string) error {
	rt := d.cfg.Runtime
	st, err := rt.State(ctx, cid)
	if errors.Is(err, runtime.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Status == runtime.StatusRunning || st.Status == runtime.StatusPaused {
		if st.Status == runtime.StatusPaused {
			_ = rt.Resume(ctx, cid)
		}
		_ = rt.Kill(ctx, cid, syscall.SIGTERM, false)
		deadline := time.Now().Add(d.cfg.StopTimeout)
		for time.Now().Before(deadline) {
			st, err := rt.State(ctx, cid)
			if err != nil || st.Status == runtime.StatusStopped {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	if err := rt.Delete(ctx, cid, true); err != nil && !errors.Is(err, runtime.ErrNotExist) {
		return err
	}
	return nil
}

// StartSandbox re-creates a stopped sandbox's container from its retained
// bundle. Idempotent: a running sandbox is left alone.
func (d *Driver) StartSandbox(ctx context.Context, req *pb.StartSandboxRequest) (*pb.StartSandboxResponse, error) {
	id, rec, unlock, err := d.lockRecord(req.GetSandboxId(), req.GetSandboxName())
	if err != nil {
		return nil, err
	}
	defer unlock()
	if rec.Deleting || !rec.Ready {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %s is being created or deleted", id)
	}
	if err := d.start(ctx, id); err != nil {
		return nil, status.Errorf(codes.Internal, "start sandbox %s: %v", id, err)
	}
	if rec.Stopped {
		rec.Stopped = false
		if err := d.writeRecord(id, rec); err != nil {
			return nil, status.Errorf(codes.Internal, "start sandbox %s: %v", id, err)
		}
	}
	d.publish(id)
	return &pb.StartSandboxResponse{}, nil
}

// DeleteSandbox removes the container, bundle, token and workspace.
// Idempotent: deleting a sandbox that does not exist answers
// deleted=false.
func (d *Driver) DeleteSandbox(ctx context.Context, req *pb.DeleteSandboxRequest) (*pb.DeleteSandboxResponse, error) {
	id, err := d.find(req.GetSandboxId(), req.GetSandboxName())
	if status.Code(err) == codes.NotFound {
		return &pb.DeleteSandboxResponse{Deleted: false}, nil
	}
	if err != nil {
		return nil, err
	}
	unlock := d.lock(id)
	defer unlock()
	rec, err := d.readRecord(id)
	if err != nil {
		return &pb.DeleteSandboxResponse{Deleted: false}, nil
	}
	rec.Deleting = true
	if err := d.writeRecord(id, rec); err != nil {
		return nil, status.Errorf(codes.Internal, "delete sandbox %s: %v", id, err)
	}
	d.publish(id) // Deleting
	if err := d.stopContainer(ctx, ContainerID(id)); err != nil {
		return nil, status.Errorf(codes.Internal, "delete sandbox %s: %v", id, err)
	}
	if err := d.destroy(ctx, id); err != nil {
		return nil, status.Errorf(codes.Internal, "delete sandbox %s: %v", id, err)
	}
	d.publish(id) // deleted
	return &pb.DeleteSandboxResponse{Deleted: true}, nil
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
	ctx := stream.Context()
	q := &watchQueue{wake: make(chan struct{}, 1)}
	d.mu.Lock()
	d.watchers[q] = struct{}{}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.watchers, q)
		d.mu.Unlock()
	}()
	seen := map[string]*pb.DriverSandbox{}
	tick := time.NewTicker(d.cfg.PollInterval)
	defer tick.Stop()
	look := func() error {
		ents, err := os.ReadDir(d.sandboxesDir())
		if err != nil {
			return status.Errorf(codes.Internal, "list sandboxes: %v", err)
		}
		ids := map[string]bool{}
		for _, e := range ents {
			ids[e.Name()] = true
		}
		for id := range seen {
			ids[id] = true
		}
		sorted := make([]string, 0, len(ids))
		for id := range ids {
			sorted = append(sorted, id)
		}
		sort.Strings(sorted)
		for _, id := range sorted {
			unlock, ok := d.tryLock(id)
			if !ok {
				continue // a mutation is under way: it publishes its states
			}
			sb, err := d.snapshot(ctx, id, false)
			if err != nil {
				sb = nil
			}
			q.push(watchItem{id: id, sandbox: sb})
			unlock()
		}
		return nil
	}
	send := func() error {
		for _, it := range q.take() {
			prev, ok := seen[it.id]
			switch {
			case it.sandbox == nil && ok:
				delete(seen, it.id)
				if err := stream.Send(&pb.WatchSandboxesEvent{Payload: &pb.WatchSandboxesEvent_Deleted{Deleted: &pb.WatchSandboxesDeletedEvent{SandboxId: it.id}}}); err != nil {
					return err
				}
			case it.sandbox == nil, ok && proto.Equal(prev, it.sandbox):
			default:
				seen[it.id] = it.sandbox
				if err := stream.Send(&pb.WatchSandboxesEvent{Payload: &pb.WatchSandboxesEvent_Sandbox{Sandbox: &pb.WatchSandboxesSandboxEvent{Sandbox: it.sandbox}}}); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for {
		changed := d.changes()
		if err := look(); err != nil {
			return err
		}
		if err := send(); err != nil {
			return err
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return nil
			case <-q.wake:
				if err := send(); err != nil {
					return err
				}
			case <-changed:
				waiting = false
			case <-tick.C:
				waiting = false
			}
		}
	}
}

// workspaceName is what a workspace name may be (a directory name).
var workspaceName = idPattern

// EnsureWorkspace creates the workspace's directory. Idempotent.
func (d *Driver) EnsureWorkspace(_ context.Context, req *pb.EnsureWorkspaceRequest) (*pb.EnsureWorkspaceResponse, error) {
	ws := req.GetWorkspace()
	if !workspaceName.MatchString(ws) {
		return nil, invalid("workspace", "%q is not a valid workspace name", ws)
	}
	if err := os.Mkdir(filepath.Join(d.cfg.StateDir, "workspaces", ws), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, status.Errorf(codes.Internal, "workspace %s: %v", ws, err)
	}
	return &pb.EnsureWorkspaceResponse{}, nil
}

// DeleteWorkspace removes the workspace's directory; FailedPrecondition
// while sandboxes of the workspace exist. Idempotent.
func (d *Driver) DeleteWorkspace(ctx context.Context, req *pb.DeleteWorkspaceRequest) (*pb.DeleteWorkspaceResponse, error) {
	ws := req.GetWorkspace()
	if !workspaceName.MatchString(ws) {
		return nil, invalid("workspace", "%q is not a valid workspace name", ws)
	}
	sbs, err := d.list(ctx, false)
	if err != nil {
		return nil, err
	}
	for _, sb := range sbs {
		if sb.GetWorkspace() == ws {
			return nil, status.Errorf(codes.FailedPrecondition, "workspace %s still has sandbox %s", ws, sb.GetId())
		}
	}
	if err := os.RemoveAll(filepath.Join(d.cfg.StateDir, "workspaces", ws)); err != nil {
		return nil, status.Errorf(codes.Internal, "workspace %s: %v", ws, err)
	}
	return &pb.DeleteWorkspaceResponse{}, nil
}

// mainProcessSpec is OPENSHELL_MAIN_PROCESS_SPEC: the canonical command
// the supervisor runs, as versioned JSON.
func mainProcessSpec(spec *pb.DriverSandboxSpec) string {
	mp := struct {
		Version int      `json:"version"`
		Command []string `json:"command"`
		TTY     bool     `json:"tty"`
	}{1, []string{"/bin/bash", "-l"}, true}
	if len(spec.GetCommand()) > 0 {
		mp.Command, mp.TTY = spec.GetCommand(), spec.GetTty()
	}
	data, _ := json.Marshal(mp)
	return string(data)
}
