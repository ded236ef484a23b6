package openshell

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/skillrun/skillrun/egress/policy"
	pb "github.com/skillrun/skillrun/openshell/computev1"
	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/fake"
)

// observed is what GetSandbox and ListSandboxes answer for the sandbox a
// create request named: the request without its token, with a status.
func observed(req *pb.DriverSandbox, instance bool, status, reason, message string) *pb.DriverSandbox {
	sb := proto.Clone(req).(*pb.DriverSandbox)
	if sb.Spec != nil {
		sb.Spec.SandboxToken = ""
	}
	sb.Status = &pb.DriverSandboxStatus{
		SandboxName: sb.GetName(),
		Conditions:  []*pb.DriverCondition{{Type: "Ready", Status: status, Reason: reason, Message: message}},
		Deleting:    reason == reasonDeleting,
	}
	if instance {
		sb.Status.InstanceId = ContainerID(sb.GetId())
	}
	return sb
}

func wantSandbox(t *testing.T, what string, got, want *pb.DriverSandbox) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Fatalf("%s:\n got  %v\n want %v", what, got, want)
	}
}

// takeCalls returns the fake runtime's calls since the last takeCalls.
func takeCalls(rt *fake.Runtime, from *int) []string {
	calls := slices.Clone(rt.Calls[*from:])
	*from = len(rt.Calls)
	return calls
}

// TestDriverLifecycle drives one sandbox through every state over the
// real gRPC path: create, get (by ID and by name), list, stop, start,
// delete, and checks what each step did to the runtime and the state
// directory.
func TestDriverLifecycle(t *testing.T) {
	rt := fake.New()
	cfg := testConfig(t, rt)
	d := newDriver(t, cfg)
	c := serve(t, d)
	ctx := testCtx(t)
	var mark int

	caps, err := c.GetCapabilities(ctx, &pb.GetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if caps.GetDriverName() != "skillrun" || caps.GetDriverVersion() != "v-test" || caps.GetDefaultImage() != testImage || !caps.GetGatewayManagesLifecycle() {
		t.Errorf("capabilities %v", caps)
	}
	gl, err := c.GetGatewayListenerRequirements(ctx, &pb.GetGatewayListenerRequirementsRequest{})
	if err != nil || len(gl.GetRequirements()) != 1 || gl.GetRequirements()[0].GetLoopbackInterface() == nil {
		t.Errorf("listener requirements %v, %v; want the gateway's loopback listener", gl, err)
	}

	req := newSandbox("sb1")
	if _, err := c.ValidateSandboxCreate(ctx, &pb.ValidateSandboxCreateRequest{Sandbox: req}); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if ents, _ := os.ReadDir(d.sandboxesDir()); len(ents) != 0 {
		t.Fatalf("validate touched the state directory: %v", ents)
	}
	if _, err := c.CreateSandbox(ctx, &pb.CreateSandboxRequest{Sandbox: req}); err != nil {
		t.Fatalf("create: %v", err)
	}
	if got := takeCalls(rt, &mark); !reflect.DeepEqual(got, []string{"create openshell-sb1", "start openshell-sb1"}) {
		t.Errorf("create: runtime calls %q", got)
	}
	st, err := rt.State(ctx, "openshell-sb1")
	if err != nil || st.Status != runtime.StatusRunning || st.Bundle != d.bundleDir("sb1") {
		t.Fatalf("container after create: %+v, %v", st, err)
	}
	ready := observed(req, true, "True", reasonReady, "Container is running")
	g, err := c.GetSandbox(ctx, &pb.GetSandboxRequest{SandboxId: "sb1"})
	if err != nil {
		t.Fatal(err)
	}
	wantSandbox(t, "get by ID after create", g.GetSandbox(), ready)
	g, err = c.GetSandbox(ctx, &pb.GetSandboxRequest{SandboxName: "name-sb1"})
	if err != nil {
		t.Fatal(err)
	}
	wantSandbox(t, "get by name after create", g.GetSandbox(), ready)
	l, err := c.ListSandboxes(ctx, &pb.ListSandboxesRequest{})
	if err != nil || len(l.GetSandboxes()) != 1 {
		t.Fatalf("list: %v, %v", l, err)
	}
	wantSandbox(t, "list after create", l.GetSandboxes()[0], ready)

	// What create left on disk: the record without the token, the token
	// file, the unpacked rootfs and the bundle's config.
	dir := d.sandboxDir("sb1")
	rec, err := os.ReadFile(d.recordPath("sb1"))
	if err != nil || strings.Contains(string(rec), "token-sb1") || !strings.Contains(string(rec), `"ready":true`) {
		t.Errorf("record %s, %v", rec, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "auth", "sandbox.jwt")); err != nil || fi.Mode().Perm() != 0o400 {
		t.Errorf("token file: %v, %v", fi, err)
	}
	if tok, _ := os.ReadFile(filepath.Join(dir, "auth", "sandbox.jwt")); string(tok) != "token-sb1" {
		t.Errorf("token file holds %q", tok)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "bundle", "rootfs", "etc", "hello")); err != nil || string(b) != "hello\n" {
		t.Errorf("rootfs: %q, %v", b, err)
	}
	spec, err := runtime.LoadBundle(d.bundleDir("sb1"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{SupervisorPath, "--workdir", "/work"}; !reflect.DeepEqual(spec.Process.Args, want) {
		t.Errorf("args %q, want %q", spec.Process.Args, want)
	}
	ro := []string{"bind", "ro", "nosuid", "nodev", "noexec"}
	wantMounts := []specs.Mount{
		{Destination: "/work", Type: "bind", Source: filepath.Join(dir, "workspace"), Options: []string{"rbind", "rw"}},
		{Destination: SupervisorPath, Type: "bind", Source: cfg.SupervisorBin, Options: []string{"bind", "ro", "nosuid", "nodev"}},
		{Destination: TLSCAPath, Type: "bind", Source: cfg.TLS.CA, Options: ro},
		{Destination: TLSCertPath, Type: "bind", Source: cfg.TLS.Cert, Options: ro},
		{Destination: TLSKeyPath, Type: "bind", Source: cfg.TLS.Key, Options: ro},
		{Destination: "/etc/hosts", Type: "bind", Source: filepath.Join(dir, "etc", "hosts"), Options: ro},
		{Destination: "/etc/resolv.conf", Type: "bind", Source: filepath.Join(dir, "etc", "resolv.conf"), Options: ro},
		{Destination: TokenPath, Type: "bind", Source: filepath.Join(dir, "auth", "sandbox.jwt"), Options: ro},
	}
	if !reflect.DeepEqual(spec.Mounts, wantMounts) {
		t.Errorf("mounts %+v\nwant %+v", spec.Mounts, wantMounts)
	}
	if spec.Hostname != "name-sb1" || spec.Annotations["openshell.ai/sandbox-id"] != "sb1" || spec.Annotations["openshell.ai/sandbox-workspace"] != "ws" {
		t.Errorf("hostname %q annotations %v", spec.Hostname, spec.Annotations)
	}
	if !slices.Contains(spec.Process.Env, "SPEC_VAR=spec") || !slices.Contains(spec.Process.Env, "IMAGE_VAR=from-image") ||
		!slices.Contains(spec.Process.Env, "OPENSHELL_SANDBOX_TOKEN_FILE="+TokenPath) {
		t.Errorf("env %q", spec.Process.Env)
	}
	if len(spec.Linux.Namespaces) != 3 {
		t.Errorf("namespaces %v: without HostNetwork the network namespace stays", spec.Linux.Namespaces)
	}

	if _, err := c.StopSandbox(ctx, &pb.StopSandboxRequest{SandboxId: "sb1"}); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if got := takeCalls(rt, &mark); !reflect.DeepEqual(got, []string{"kill openshell-sb1", "delete openshell-sb1"}) {
		t.Errorf("stop: runtime calls %q", got)
	}
	if _, err := rt.State(ctx, "openshell-sb1"); err != runtime.ErrNotExist {
		t.Errorf("container after stop: %v", err)
	}
	g, err = c.GetSandbox(ctx, &pb.GetSandboxRequest{SandboxId: "sb1"})
	if err != nil {
		t.Fatal(err)
	}
	wantSandbox(t, "get after stop", g.GetSandbox(), observed(req, false, "False", reasonExited, "Sandbox is stopped"))
	if _, err := os.Stat(filepath.Join(dir, "bundle", "config.json")); err != nil {
		t.Errorf("stop removed the bundle: %v", err)
	}

	if _, err := c.StartSandbox(ctx, &pb.StartSandboxRequest{SandboxName: "name-sb1"}); err != nil {
		t.Fatalf("start: %v", err)
	}
	if got := takeCalls(rt, &mark); !reflect.DeepEqual(got, []string{"create openshell-sb1", "start openshell-sb1"}) {
		t.Errorf("start: runtime calls %q", got)
	}
	g, err = c.GetSandbox(ctx, &pb.GetSandboxRequest{SandboxId: "sb1"})
	if err != nil {
		t.Fatal(err)
	}
	wantSandbox(t, "get after start", g.GetSandbox(), ready)
	if rec, _ := os.ReadFile(d.recordPath("sb1")); strings.Contains(string(rec), "stopped") {
		t.Errorf("record after start still stopped: %s", rec)
	}

	del, err := c.DeleteSandbox(ctx, &pb.DeleteSandboxRequest{SandboxId: "sb1"})
	if err != nil || !del.GetDeleted() {
		t.Fatalf("delete: %v, %v", del, err)
	}
	if got := takeCalls(rt, &mark); !reflect.DeepEqual(got, []string{"kill openshell-sb1", "delete openshell-sb1", "delete openshell-sb1"}) {
		t.Errorf("delete: runtime calls %q", got)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("sandbox directory after delete: %v", err)
	}
	_, err = c.GetSandbox(ctx, &pb.GetSandboxRequest{SandboxId: "sb1"})
	wantCode(t, err, codes.NotFound, "sandbox sb1 not found")
	l, err = c.ListSandboxes(ctx, &pb.ListSandboxesRequest{})
	if err != nil || len(l.GetSandboxes()) != 0 {
		t.Fatalf("list after delete: %v, %v", l, err)
	}
}

// TestDriverIdempotency: what repeating a request answers.
func TestDriverIdempotency(t *testing.T) {
	rt := fake.New()
	d := newDriver(t, testConfig(t, rt))
	c := serve(t, d)
	ctx := testCtx(t)
	var mark int

	req := newSandbox("twice")
	if _, err := c.CreateSandbox(ctx, &pb.CreateSandboxRequest{Sandbox: req}); err != nil {
		t.Fatal(err)
	}
	takeCalls(rt, &mark)
	// A second create of the same ID is refused and leaves the first alone
	// (even with another name).
	again := newSandbox("twice")
	again.Name = "other-name"
	_, err := c.CreateSandbox(ctx, &pb.CreateSandboxRequest{Sandbox: again})
	wantCode(t, err, codes.AlreadyExists, "sandbox twice already exists")
	if got := takeCalls(rt, &mark); len(got) != 0 {
		t.Errorf("second create: runtime calls %q", got)
	}
	g, err := c.GetSandbox(ctx, &pb.GetSandboxRequest{SandboxId: "twice"})
	if err != nil {
		t.Fatal(err)
	}
	wantSandbox(t, "after a second create", g.GetSandbox(), observed(req, true, "True", reasonReady, "Container is running"))

	// Starting a running sandbox does nothing.
	if _, err := c.StartSandbox(ctx, &pb.StartSandboxRequest{SandboxId: "twice"}); err != nil {
		t.Fatal(err)
	}
	if got := takeCalls(rt, &mark); len(got) != 0 {
		t.Errorf("start of a running sandbox: runtime calls %q", got)
	}

	// Stopping a stopped sandbox succeeds and touches no container.
	for i := range 2 {
		if _, err := c.StopSandbox(ctx, &pb.StopSandboxRequest{SandboxId: "twice"}); err != nil {
			t.Fatalf("stop %d: %v", i, err)
		}
	}
	if got := takeCalls(rt, &mark); !reflect.DeepEqual(got, []string{"kill openshell-twice", "delete openshell-twice"}) {
		t.Errorf("two stops: runtime calls %q", got)
	}
	g, err = c.GetSandbox(ctx, &pb.GetSandboxRequest{SandboxId: "twice"})
	if err != nil {
		t.Fatal(err)
	}
	wantSandbox(t, "after two stops", g.GetSandbox(), observed(req, false, "False", reasonExited, "Sandbox is stopped"))

	// Deleting twice: deleted, then not.
	for i, want := range []bool{true, false} {
		del, err := c.DeleteSandbox(ctx, &pb.DeleteSandboxRequest{SandboxId: "twice"})
		if err != nil || del.GetDeleted() != want {
			t.Fatalf("delete %d: %v, %v; want deleted=%v", i, del, err, want)
		}
	}
	del, err := c.DeleteSandbox(ctx, &pb.DeleteSandboxRequest{SandboxName: "never-was"})
	if err != nil || del.GetDeleted() {
		t.Fatalf("delete of an unknown name: %v, %v", del, err)
	}
	// Creating it again after the delete works.
	if _, err := c.CreateSandbox(ctx, &pb.CreateSandboxRequest{Sandbox: req}); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
}

// TestDriverNotFound: the sandbox-naming RPCs on a sandbox that does not
// exist, and on requests that name none or a bad ID.
func TestDriverNotFound(t *testing.T) {
	d := newDriver(t, testConfig(t, fake.New()))
	c := serve(t, d)
	ctx := testCtx(t)
	type call func(id, name string) error
	calls := map[string]call{
		"get": func(id, name string) error {
			_, err := c.GetSandbox(ctx, &pb.GetSandboxRequest{SandboxId: id, SandboxName: name})
			return err
		},
		"stop": func(id, name string) error {
			_, err := c.StopSandbox(ctx, &pb.StopSandboxRequest{SandboxId: id, SandboxName: name})
			return err
		},
		"start": func(id, name string) error {
			_, err := c.StartSandbox(ctx, &pb.StartSandboxRequest{SandboxId: id, SandboxName: name})
			return err
		},
		"delete": func(id, name string) error {
			_, err := c.DeleteSandbox(ctx, &pb.DeleteSandboxRequest{SandboxId: id, SandboxName: name})
			return err
		},
	}
	for verb, f := range calls {
		t.Run(verb, func(t *testing.T) {
			wantCode(t, f("", ""), codes.InvalidArgument, "sandbox_id or sandbox_name is required")
			wantCode(t, f("../x", ""), codes.InvalidArgument, `sandbox_id: "../x" is not a valid sandbox ID`)
			if verb == "delete" { // answers deleted=false instead
				if err := f("nope", ""); err != nil {
					t.Errorf("delete of an unknown ID: %v", err)
				}
				return
			}
			wantCode(t, f("nope", ""), codes.NotFound, "sandbox nope not found")
			wantCode(t, f("", "nope"), codes.NotFound, `sandbox named "nope" not found`)
			// The ID wins over the name.
			wantCode(t, f("nope", "whatever"), codes.NotFound, "sandbox nope not found")
		})
	}
}

// TestDriverValidation: every field ValidateSandboxCreate and
// CreateSandbox check, with the status they answer; a refused create
// leaves nothing behind.
func TestDriverValidation(t *testing.T) {
	rt := fake.New()
	cfg := testConfig(t, rt)
	d := newDriver(t, cfg)
	c := serve(t, d)
	ctx := testCtx(t)
	mod := func(f func(sb *pb.DriverSandbox)) *pb.DriverSandbox {
		sb := newSandbox("v")
		f(sb)
		return sb
	}
	var one uint32 = 1
	for name, tc := range map[string]struct {
		sb   *pb.DriverSandbox
		code codes.Code
		msg  string
	}{
		"no sandbox":    {nil, codes.InvalidArgument, "sandbox: is required"},
		"empty id":      {mod(func(s *pb.DriverSandbox) { s.Id = "" }), codes.InvalidArgument, `sandbox.id: "" is not a valid sandbox ID (letters, digits, '_', '.', '-'; at most 128)`},
		"id with slash": {mod(func(s *pb.DriverSandbox) { s.Id = "a/b" }), codes.InvalidArgument, `sandbox.id: "a/b" is not a valid sandbox ID (letters, digits, '_', '.', '-'; at most 128)`},
		"id with dot":   {mod(func(s *pb.DriverSandbox) { s.Id = ".." }), codes.InvalidArgument, `sandbox.id: ".." is not a valid sandbox ID (letters, digits, '_', '.', '-'; at most 128)`},
		"id too long":   {mod(func(s *pb.DriverSandbox) { s.Id = strings.Repeat("a", 129) }), codes.InvalidArgument, `sandbox.id: "` + strings.Repeat("a", 129) + `" is not a valid sandbox ID (letters, digits, '_', '.', '-'; at most 128)`},
		"no name":       {mod(func(s *pb.DriverSandbox) { s.Name = "" }), codes.InvalidArgument, "sandbox.name: is required"},
		"gpu": {mod(func(s *pb.DriverSandbox) {
			s.Spec.ResourceRequirements = &pb.ResourceRequirements{Gpu: &pb.GpuResourceRequirements{Count: &one}}
		}), codes.FailedPrecondition, "sandbox.spec.resource_requirements.gpu: GPUs are not supported by the skillrun driver"},
		"env key with =": {mod(func(s *pb.DriverSandbox) { s.Spec.Environment = map[string]string{"A=B": "x"} }), codes.InvalidArgument, `sandbox.spec.environment: invalid variable "A=B"`},
		"env empty key":  {mod(func(s *pb.DriverSandbox) { s.Spec.Environment = map[string]string{"": "x"} }), codes.InvalidArgument, `sandbox.spec.environment: invalid variable ""`},
		"env NUL value":  {mod(func(s *pb.DriverSandbox) { s.Spec.Environment = map[string]string{"A": "x\x00"} }), codes.InvalidArgument, `sandbox.spec.environment: invalid variable "A"`},
		"template env":   {mod(func(s *pb.DriverSandbox) { s.Spec.Template.Environment = map[string]string{"B\x00": "x"} }), codes.InvalidArgument, `sandbox.spec.template.environment: invalid variable "B\x00"`},
		"command NUL":    {mod(func(s *pb.DriverSandbox) { s.Spec.Command = []string{"sh", "a\x00"} }), codes.InvalidArgument, "sandbox.spec.command[1]: contains a NUL byte"},
		"command empty":  {mod(func(s *pb.DriverSandbox) { s.Spec.Command = []string{"", "x"} }), codes.InvalidArgument, "sandbox.spec.command[0]: is empty"},
		"cpu request": {mod(func(s *pb.DriverSandbox) {
			s.Spec.Template.Resources = &pb.DriverResourceRequirements{CpuRequest: "lots"}
		}), codes.FailedPrecondition, `sandbox.spec.template.resources.cpu_request: "lots" is not a quantity (want e.g. 500m, 2, 0.5, 1e3, 256Mi, 4Gi)`},
		"memory request": {mod(func(s *pb.DriverSandbox) {
			s.Spec.Template.Resources = &pb.DriverResourceRequirements{MemoryRequest: "-1"}
		}), codes.FailedPrecondition, `sandbox.spec.template.resources.memory_request: "-1": must be greater than zero`},
		"cpu limit": {mod(func(s *pb.DriverSandbox) {
			s.Spec.Template.Resources = &pb.DriverResourceRequirements{CpuLimit: "0"}
		}), codes.FailedPrecondition, `sandbox.spec.template.resources.cpu_limit: "0": must be greater than zero`},
		"cpu limit under the CFS minimum": {mod(func(s *pb.DriverSandbox) {
			s.Spec.Template.Resources = &pb.DriverResourceRequirements{CpuLimit: "1m"}
		}), codes.FailedPrecondition, `sandbox.spec.template.resources.cpu_limit: "1m" is below the minimum 10m (the kernel's smallest CFS quota: 1 ms per 100 ms period)`},
		"memory limit": {mod(func(s *pb.DriverSandbox) {
			s.Spec.Template.Resources = &pb.DriverResourceRequirements{MemoryLimit: "4Ki"}
		}), codes.FailedPrecondition, `sandbox.spec.template.resources.memory_limit: "4Ki" is below the minimum 6Mi`},
		"unknown image": {mod(func(s *pb.DriverSandbox) { s.Spec.Template.Image = "nosuch:1" }), codes.FailedPrecondition,
			`sandbox.spec.template.image: "nosuch:1" is not in the image layout ` + cfg.ImagesDir},
		"other architecture": {mod(func(s *pb.DriverSandbox) { s.Spec.Template.Image = otherArchImage }), codes.FailedPrecondition,
			`sandbox.spec.template.image: "otherarch:1": no linux/` + goarch() + ` manifest for "otherarch:1"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.ValidateSandboxCreate(ctx, &pb.ValidateSandboxCreateRequest{Sandbox: tc.sb})
			wantCode(t, err, tc.code, tc.msg)
			_, err = c.CreateSandbox(ctx, &pb.CreateSandboxRequest{Sandbox: tc.sb})
			wantCode(t, err, tc.code, tc.msg)
		})
	}
	if ents, _ := os.ReadDir(d.sandboxesDir()); len(ents) != 0 {
		t.Errorf("refused creates left %v", ents)
	}
	if len(rt.Calls) != 0 {
		t.Errorf("refused creates called the runtime: %q", rt.Calls)
	}
	// Valid edge cases: the longest ID, requests without a template image
	// (the default image) and quantities with suffixes.
	ok := mod(func(s *pb.DriverSandbox) {
		s.Id = strings.Repeat("a", 128)
		s.Spec.Template.Image = ""
		s.Spec.Template.Resources = &pb.DriverResourceRequirements{CpuRequest: "100m", CpuLimit: "1.5", MemoryRequest: "1Mi", MemoryLimit: "64Mi"}
	})
	if _, err := c.ValidateSandboxCreate(ctx, &pb.ValidateSandboxCreateRequest{Sandbox: ok}); err != nil {
		t.Errorf("valid request: %v", err)
	}
}

// TestDriverValidationWithoutImages: a driver without a default image or
// without an image layout refuses every image.
func TestDriverValidationWithoutImages(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, fake.New())
	cfg.DefaultImage = ""
	d := newDriver(t, cfg)
	sb := newSandbox("i")
	sb.Spec.Template.Image = ""
	_, err := d.ValidateSandboxCreate(ctx, &pb.ValidateSandboxCreateRequest{Sandbox: sb})
	wantCode(t, err, codes.FailedPrecondition, "sandbox.spec.template.image: is required (the driver has no default image)")

	cfg = testConfig(t, fake.New())
	cfg.ImagesDir = ""
	d = newDriver(t, cfg)
	_, err = d.ValidateSandboxCreate(ctx, &pb.ValidateSandboxCreateRequest{Sandbox: newSandbox("i")})
	wantCode(t, err, codes.FailedPrecondition, `sandbox.spec.template.image: "busybox:test": the driver has no image layout (--images)`)
	_, err = d.CreateSandbox(ctx, &pb.CreateSandboxRequest{Sandbox: newSandbox("i")})
	wantCode(t, err, codes.FailedPrecondition, `sandbox.spec.template.image: "busybox:test": the driver has no image layout (--images)`)
}

// TestDriverWorkspaces: EnsureWorkspace and DeleteWorkspace, idempotent,
// refusing bad names and a workspace that still has a sandbox.
func TestDriverWorkspaces(t *testing.T) {
	d := newDriver(t, testConfig(t, fake.New()))
	c := serve(t, d)
	ctx := testCtx(t)
	wsDir := filepath.Join(d.cfg.StateDir, "workspaces", "ws")
	for i := range 2 {
		if _, err := c.EnsureWorkspace(ctx, &pb.EnsureWorkspaceRequest{Workspace: "ws"}); err != nil {
			t.Fatalf("ensure %d: %v", i, err)
		}
	}
	if fi, err := os.Stat(wsDir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("workspace directory: %v, %v", fi, err)
	}
	for _, bad := range []string{"", "../x", "a/b", ".hidden"} {
		_, err := c.EnsureWorkspace(ctx, &pb.EnsureWorkspaceRequest{Workspace: bad})
		wantCode(t, err, codes.InvalidArgument, `workspace: "`+bad+`" is not a valid workspace name`)
		_, err = c.DeleteWorkspace(ctx, &pb.DeleteWorkspaceRequest{Workspace: bad})
		wantCode(t, err, codes.InvalidArgument, `workspace: "`+bad+`" is not a valid workspace name`)
	}
	if _, err := c.CreateSandbox(ctx, &pb.CreateSandboxRequest{Sandbox: newSandbox("inws")}); err != nil {
		t.Fatal(err)
	}
	_, err := c.DeleteWorkspace(ctx, &pb.DeleteWorkspaceRequest{Workspace: "ws"})
	wantCode(t, err, codes.FailedPrecondition, "workspace ws still has sandbox inws")
	// A stopped sandbox still counts.
	if _, err := c.StopSandbox(ctx, &pb.StopSandboxRequest{SandboxId: "inws"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteWorkspace(ctx, &pb.DeleteWorkspaceRequest{Workspace: "ws"})
	wantCode(t, err, codes.FailedPrecondition, "workspace ws still has sandbox inws")
	if _, err := c.DeleteSandbox(ctx, &pb.DeleteSandboxRequest{SandboxId: "inws"}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := c.DeleteWorkspace(ctx, &pb.DeleteWorkspaceRequest{Workspace: "ws"}); err != nil {
			t.Fatalf("delete %d: %v", i, err)
		}
	}
	if _, err := os.Lstat(wsDir); !os.IsNotExist(err) {
		t.Errorf("workspace directory after delete: %v", err)
	}
}

// TestNewChecksConfig: New's refusals.
func TestNewChecksConfig(t *testing.T) {
	ctx := context.Background()
	notExec := filepath.Join(t.TempDir(), "sv")
	os.WriteFile(notExec, []byte("x"), 0o644)
	for name, tc := range map[string]struct {
		mod  func(c *Config)
		want string
	}{
		"no runtime":        {func(c *Config) { c.Runtime = nil }, "openshell driver: no runtime"},
		"no state":          {func(c *Config) { c.StateDir = "" }, "openshell driver: state directory is empty"},
		"missing sv":        {func(c *Config) { c.SupervisorBin = "/nonexistent/sv" }, "supervisor binary: stat /nonexistent/sv: no such file or directory"},
		"sv not executable": {func(c *Config) { c.SupervisorBin = notExec }, "supervisor binary " + notExec + " is not an executable file"},
		"sv a directory":    {func(c *Config) { c.SupervisorBin = filepath.Dir(notExec) }, "supervisor binary " + filepath.Dir(notExec) + " is not an executable file"},
		"no base spec":      {func(c *Config) { c.BaseSpec = nil }, "openshell driver: no base spec"},
		"missing images":    {func(c *Config) { c.ImagesDir = "/nonexistent/images" }, "images: stat /nonexistent/images: no such file or directory"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t, fake.New())
			tc.mod(&cfg)
			d, _, err := New(ctx, cfg)
			if err == nil || err.Error() != tc.want || d != nil {
				t.Fatalf("New: %v, %v; want %q", d, err, tc.want)
			}
		})
	}
	// The defaults New fills in, and the state directory it makes.
	cfg := testConfig(t, fake.New())
	cfg.PollInterval, cfg.StopTimeout, cfg.LogLevel = 0, 0, ""
	d := newDriver(t, cfg)
	if d.cfg.PollInterval.String() != "500ms" || d.cfg.StopTimeout.String() != "10s" || d.cfg.LogLevel != "info" {
		t.Errorf("defaults: %v %v %q", d.cfg.PollInterval, d.cfg.StopTimeout, d.cfg.LogLevel)
	}
	for _, sub := range []string{"", "sandboxes", "workspaces"} {
		if fi, err := os.Stat(filepath.Join(cfg.StateDir, sub)); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("state directory %q: %v, %v", sub, fi, err)
		}
	}
}

// TestCreateSpecOptions: HostNetwork (with a plaintext endpoint naming
// an address), labels, resources, the log level, the command and a name
// that is no hostname reach config.json.
func TestCreateSpecOptions(t *testing.T) {
	cfg := testConfig(t, fake.New())
	cfg.HostNetwork = true
	cfg.Endpoint, cfg.TLS = "http://10.0.0.5:7000", TLSFiles{}
	cfg.LogLevel = "debug"
	d := newDriver(t, cfg)
	ctx := testCtx(t)
	sb := newSandbox("opts")
	sb.Name = "Not_A_Hostname"
	sb.Spec.SandboxToken = ""
	sb.Spec.Command = []string{"/bin/sh", "-c", "true"}
	sb.Spec.Template.Labels = map[string]string{"team": "a", "openshell.ai/sandbox-id": "spoof", "run.skillrun.network.allow": "example.com"}
	sb.Spec.Template.Resources = &pb.DriverResourceRequirements{CpuLimit: "500m", MemoryLimit: "64Mi"}
	if _, err := d.CreateSandbox(ctx, &pb.CreateSandboxRequest{Sandbox: sb}); err != nil {
		t.Fatal(err)
	}
	spec, err := runtime.LoadBundle(d.bundleDir("opts"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range spec.Linux.Namespaces {
		if ns.Type == specs.NetworkNamespace {
			t.Errorf("HostNetwork kept the network namespace: %v", spec.Linux.Namespaces)
		}
	}
	if len(spec.Linux.Namespaces) != 2 {
		t.Errorf("namespaces %v", spec.Linux.Namespaces)
	}
	if spec.Hostname != "" {
		t.Errorf("hostname %q from a name that is no hostname", spec.Hostname)
	}
	if spec.Annotations["team"] != "a" || spec.Annotations["openshell.ai/sandbox-id"] != "opts" || spec.Annotations[policy.AnnotationAllow] != "" || spec.Annotations[policy.AnnotationResolve] != "" {
		t.Errorf("annotations %v", spec.Annotations)
	}
	r := spec.Linux.Resources
	if r.CPU == nil || *r.CPU.Quota != 50000 || *r.CPU.Period != 100000 || r.Memory == nil || *r.Memory.Limit != 64<<20 || *r.Pids.Limit != SandboxPidsLimit {
		t.Errorf("resources %+v", r)
	}
	if spec.Process.Rlimits != nil {
		t.Errorf("rlimits %v", spec.Process.Rlimits)
	}
	var dests []string
	for _, m := range spec.Mounts {
		dests = append(dests, m.Destination)
	}
	if want := []string{"/work", SupervisorPath, "/etc/hosts", "/etc/resolv.conf"}; !reflect.DeepEqual(dests, want) {
		t.Errorf("mounts %v: want %v (no token, no TLS files)", dests, want)
	}
	if b, err := os.ReadFile(filepath.Join(d.sandboxDir("opts"), "etc", "hosts")); err != nil || !strings.HasSuffix(string(b), "\n10.0.0.5\thost.openshell.internal\n") {
		t.Errorf("/etc/hosts with the host's network: %q, %v", b, err)
	}
	hostResolv, _ := os.ReadFile("/etc/resolv.conf")
	if b, err := os.ReadFile(filepath.Join(d.sandboxDir("opts"), "etc", "resolv.conf")); err != nil || string(b) != string(hostResolv) {
		t.Errorf("/etc/resolv.conf with the host's network: %q, %v; want the host's", b, err)
	}
	env := strings.Join(spec.Process.Env, "\n")
	for _, want := range []string{"OPENSHELL_LOG_LEVEL=debug", `OPENSHELL_MAIN_PROCESS_SPEC={"version":1,"command":["/bin/sh","-c","true"],"tty":false}`, "OPENSHELL_ENDPOINT=http://host.openshell.internal:7000"} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %s:\n%s", want, env)
		}
	}
	if strings.Contains(env, "OPENSHELL_SANDBOX_TOKEN_FILE") || strings.Contains(env, "OPENSHELL_TLS_") {
		t.Errorf("token file or TLS variables without a token or TLS:\n%s", env)
	}
	var rec record
	data, _ := os.ReadFile(d.recordPath("opts"))
	if err := json.Unmarshal(data, &rec); err != nil || !rec.Ready || rec.Stopped || rec.Deleting {
		t.Errorf("record %s: %v", data, err)
	}
}
