package openshell

// Request validation: what a create request and a workspace name must be,
// as errors that name the field at fault, and the template's resource
// strings (quantity.go) turned into OCI resources. The status codes are
// those OpenShell's Docker driver answers: InvalidArgument for a malformed
// request, FailedPrecondition for one this driver cannot run (a resource
// quantity it cannot apply, GPUs, an image it does not have).

import (
	"context"
	"errors"
	"fmt"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/skillrun/skillrun/openshell/computev1"
)

// validID says whether s may be a sandbox ID or a workspace name: it
// becomes part of a container ID and a directory name (what the regular
// expression ^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$ matches; checked by hand:
// compiled at package init, that expression cost every skillrun process
// start a tenth of a millisecond).
func validID(s string) bool {
	if len(s) == 0 || len(s) > 128 || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

// validHostname says whether s is one DNS label as a sandbox's hostname
// (^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$).
func validHostname(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// validEnvKey says whether k may name an environment variable (not
// empty, no '=' or NUL).
func validEnvKey(k string) bool { return k != "" && !strings.ContainsAny(k, "=\x00") }

func invalid(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
}

// unsupported is a request this driver cannot run (as the Docker driver,
// FailedPrecondition).
func unsupported(field, format string, args ...any) error {
	return status.Errorf(codes.FailedPrecondition, "%s: %s", field, fmt.Sprintf(format, args...))
}

// validate checks a create request without touching anything.
func (d *Driver) validate(ctx context.Context, sb *pb.DriverSandbox) error {
	if sb == nil {
		return invalid("sandbox", "is required")
	}
	if !validID(sb.GetId()) {
		return invalid("sandbox.id", "%q is not a valid sandbox ID (letters, digits, '_', '.', '-'; at most 128)", sb.GetId())
	}
	if sb.GetName() == "" {
		return invalid("sandbox.name", "is required")
	}
	spec := sb.GetSpec()
	if spec.GetResourceRequirements().GetGpu() != nil {
		return unsupported("sandbox.spec.resource_requirements.gpu", "GPUs are not supported by the skillrun driver")
	}
	for k, v := range spec.GetEnvironment() {
		if !validEnvKey(k) || strings.ContainsRune(v, 0) {
			return invalid("sandbox.spec.environment", "invalid variable %q", k)
		}
	}
	tmpl := spec.GetTemplate()
	for k, v := range tmpl.GetEnvironment() {
		if !validEnvKey(k) || strings.ContainsRune(v, 0) {
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
		return unsupported("sandbox.spec.template.image", "is required (the driver has no default image)")
	}
	if d.cfg.ImagesDir == "" {
		return unsupported("sandbox.spec.template.image", "%q: the driver has no image layout (--images)", image)
	}
	if err := checkImage(ctx, d.cfg.ImagesDir, image); err != nil {
		if errors.Is(err, errImageNotFound) {
			return unsupported("sandbox.spec.template.image", "%q is not in the image layout %s", image, d.cfg.ImagesDir)
		}
		return unsupported("sandbox.spec.template.image", "%q: %v", image, err)
	}
	return nil
}

// validateWorkspace checks a workspace name.
func validateWorkspace(ws string) error {
	if !validID(ws) {
		return invalid("workspace", "%q is not a valid workspace name", ws)
	}
	return nil
}

func (d *Driver) imageOf(sb *pb.DriverSandbox) string {
	if img := sb.GetSpec().GetTemplate().GetImage(); img != "" {
		return img
	}
	return d.cfg.DefaultImage
}

// resources turns the template's limits into OCI resources; validate and
// buildSpec both call it, so what one accepts the other applies. Requests
// are parsed as limits are but not enforced (a single host has nothing to
// schedule).
func (d *Driver) resources(r *pb.DriverResourceRequirements) (*specs.LinuxResources, error) {
	out := &specs.LinuxResources{}
	check := func(field, v string, parse func(string) (int64, error)) (int64, error) {
		if v == "" {
			return 0, nil
		}
		n, err := parse(v)
		if err != nil {
			return 0, unsupported("sandbox.spec.template.resources."+field, "%v", err)
		}
		return n, nil
	}
	if _, err := check("cpu_request", r.GetCpuRequest(), parseMilliCPU); err != nil {
		return nil, err
	}
	if _, err := check("memory_request", r.GetMemoryRequest(), parseBytes); err != nil {
		return nil, err
	}
	milli, err := check("cpu_limit", r.GetCpuLimit(), cpuLimit)
	if err != nil {
		return nil, err
	}
	if milli > 0 {
		period := uint64(cpuPeriod)
		quota := milli * cpuPeriod / 1000
		out.CPU = &specs.LinuxCPU{Period: &period, Quota: &quota}
	}
	mem, err := check("memory_limit", r.GetMemoryLimit(), memoryLimit)
	if err != nil {
		return nil, err
	}
	if mem > 0 {
		out.Memory = &specs.LinuxMemory{Limit: &mem}
	}
	return out, nil
}
