package openshell

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	ispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/egress/policy"
	pb "github.com/skillrun/skillrun/openshell/computev1"
)

// The supervisor container's privileges are those OpenShell's Docker
// driver asks Docker for (crates/openshell-driver-docker, create body:
// user "0", cap_add SYS_ADMIN NET_ADMIN SYS_PTRACE SYSLOG, security_opt
// apparmor=unconfined only), as Docker turns them into config.json:
// Docker's default capability set plus the added ones in the bounding,
// effective and permitted sets (inheritable and ambient empty),
// noNewPrivileges false, and Docker's default seccomp profile evaluated
// for those capabilities (github.com/moby/profiles/seccomp, the library
// dockerd itself uses). The supervisor needs SETUID/SETGID to drop to the
// sandbox user, CHOWN/FOWNER to prepare the filesystem, SETPCAP to clear
// the agent's bounding set, and SYS_ADMIN (with the profile's
// CAP_SYS_ADMIN rules: mount, unshare, setns, clone with namespace flags)
// to build the agent's namespaces and Landlock/seccomp sandbox.
var (
	// dockerDefaultCaps is Docker's default capability set (moby
	// oci/caps.DefaultCapabilities).
	dockerDefaultCaps = []string{
		"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
		"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
		"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
	}
	// supervisorCaps is the Docker driver's cap_add.
	supervisorCaps = []string{"CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_SYS_PTRACE", "CAP_SYSLOG"}
)

// SandboxPidsLimit is the sandbox's task limit: the Docker driver's
// default sandbox_pids_limit (openshell-core DEFAULT_SANDBOX_PIDS_LIMIT).
const SandboxPidsLimit = 2048

func ptr[T any](v T) *T { return &v }

// SupervisorCapabilities is the sorted capability set of the supervisor
// container (bounding = effective = permitted).
func SupervisorCapabilities() []string {
	caps := append(append([]string{}, dockerDefaultCaps...), supervisorCaps...)
	sort.Strings(caps)
	return caps
}

// workspaceRoot is where the persistent workspace is mounted: the image's
// WorkingDir, or /sandbox when it has none.
func workspaceRoot(workdir string) string {
	if workdir == "" || path.Clean(workdir) == "/" || !path.IsAbs(workdir) {
		return DefaultWorkspaceRoot
	}
	return path.Clean(workdir)
}

// environment is the sandbox's environment, as OpenShell's Docker driver
// builds it (build_environment_for_oci_user): the image's variables
// (without any OPENSHELL_* one: an image must not preset what the driver
// owns, as a token, TLS paths or the gateway's TLS server name), then HOME,
// TERM and the log level, the template's and the spec's variables (the
// spec wins; also as JSON in OPENSHELL_USER_ENVIRONMENT), then the
// driver-owned ones that the request cannot override. As the Docker
// driver it removes OPENSHELL_SANDBOX_TOKEN, OPENSHELL_SANDBOX_TOKEN_FILE
// and OPENSHELL_GATEWAY_TLS_SERVER_NAME from what the request gives (the
// supervisor checks the gateway's certificate against the endpoint's host
// name), sets OPENSHELL_OCI_IMAGE_USER to the image's USER (empty when it
// has none) and clears OPENSHELL_SANDBOX_UID and OPENSHELL_SANDBOX_GID, so
// the supervisor takes the sandbox's identity from the image.
func (d *Driver) environment(sb *pb.DriverSandbox, img *ispec.ImageConfig) []string {
	env := map[string]string{}
	for _, kv := range img.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && !strings.HasPrefix(k, "OPENSHELL_") {
			env[k] = v
		}
	}
	env["HOME"] = "/root"
	env["TERM"] = "xterm"
	spec := sb.GetSpec()
	env["OPENSHELL_LOG_LEVEL"] = d.cfg.LogLevel
	if l := spec.GetLogLevel(); l != "" {
		env["OPENSHELL_LOG_LEVEL"] = l
	}
	user := map[string]string{}
	for k, v := range spec.GetTemplate().GetEnvironment() {
		user[k] = v
	}
	for k, v := range spec.GetEnvironment() {
		user[k] = v
	}
	for k, v := range user {
		env[k] = v
	}
	if len(user) > 0 {
		env["OPENSHELL_USER_ENVIRONMENT"] = compactJSON(user)
	}
	env["OPENSHELL_ENDPOINT"] = d.gw.endpoint
	env["OPENSHELL_SANDBOX_ID"] = sb.GetId()
	env["OPENSHELL_SANDBOX"] = sb.GetName()
	env["OPENSHELL_SSH_SOCKET_PATH"] = SSHSocketPath
	env["OPENSHELL_MAIN_PROCESS_SPEC"] = mainProcessSpec(spec)
	env["OPENSHELL_TELEMETRY_ENABLED"] = "false"
	env["OPENSHELL_NETWORK_RUNTIME_CAPABILITIES"] = "policy-dns-transparent-tcp"
	env["PATH"] = supervisorSearchPath
	if d.gw.tls {
		env["OPENSHELL_TLS_CA"] = TLSCAPath
		env["OPENSHELL_TLS_CERT"] = TLSCertPath
		env["OPENSHELL_TLS_KEY"] = TLSKeyPath
	}
	delete(env, "OPENSHELL_SANDBOX_TOKEN")
	delete(env, "OPENSHELL_SANDBOX_TOKEN_FILE")
	delete(env, "OPENSHELL_GATEWAY_TLS_SERVER_NAME")
	env["OPENSHELL_OCI_IMAGE_USER"] = img.User
	env["OPENSHELL_SANDBOX_UID"] = ""
	env["OPENSHELL_SANDBOX_GID"] = ""
	if spec.GetSandboxToken() != "" {
		env["OPENSHELL_SANDBOX_TOKEN_FILE"] = TokenPath
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// compactJSON is v as JSON without HTML escaping (as serde_json writes
// it: "<" stays "<").
func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

// buildSpec writes the sandbox's token file, workspace directory and
// /etc files and returns its config.json.
func (d *Driver) buildSpec(sb *pb.DriverSandbox, img *ispec.ImageConfig) (*specs.Spec, error) {
	id := sb.GetId()
	dir := d.sandboxDir(id)
	s := d.cfg.BaseSpec()
	s.Root = &specs.Root{Path: "rootfs"}
	wsRoot := workspaceRoot(img.WorkingDir)
	s.Process.Terminal = false
	s.Process.Cwd = "/"
	s.Process.User = specs.User{UID: 0, GID: 0}
	s.Process.Args = []string{SupervisorPath, "--workdir", wsRoot}
	s.Process.Env = d.environment(sb, img)
	s.Process.Capabilities = &specs.LinuxCapabilities{
		Bounding:  SupervisorCapabilities(),
		Effective: SupervisorCapabilities(),
		Permitted: SupervisorCapabilities(),
	}
	s.Process.NoNewPrivileges = false
	// Docker's spec sets no rlimits (the container inherits the daemon's,
	// unless --default-ulimit is configured); the runc example spec's
	// RLIMIT_NOFILE of 1024 would cap the supervisor's proxy. Inherit the
	// driver's.
	s.Process.Rlimits = nil
	if validHostname(sb.GetName()) {
		s.Hostname = sb.GetName()
	}
	s.Annotations = map[string]string{}
	for k, v := range sb.GetSpec().GetTemplate().GetLabels() {
		// skillrun's own annotations (the egress allowlist's among them)
		// are the driver's, never a template's.
		if !strings.HasPrefix(k, "run.skillrun.") {
			s.Annotations[k] = v
		}
	}
	if !d.cfg.HostNetwork {
		// The sandbox's only way out: the gateway's endpoint, through
		// the egress helper the runtime starts for these annotations.
		s.Annotations[policy.AnnotationAllow] = d.gw.allow()
		s.Annotations[policy.AnnotationResolve] = d.gw.resolve()
	}
	s.Annotations["openshell.ai/managed-by"] = "openshell"
	s.Annotations["openshell.ai/sandbox-id"] = id
	s.Annotations["openshell.ai/sandbox-name"] = sb.GetName()
	s.Annotations["openshell.ai/sandbox-workspace"] = sb.GetWorkspace()

	workspace := filepath.Join(dir, "workspace")
	if err := os.Mkdir(workspace, 0o755); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	s.Mounts = append(s.Mounts, specs.Mount{Destination: wsRoot, Type: "bind", Source: workspace, Options: []string{"rbind", "rw"}})
	ro := []string{"bind", "ro", "nosuid", "nodev", "noexec"}
	s.Mounts = append(s.Mounts, specs.Mount{Destination: SupervisorPath, Type: "bind", Source: d.cfg.SupervisorBin, Options: []string{"bind", "ro", "nosuid", "nodev"}})
	if d.gw.tls {
		for _, m := range [][2]string{{TLSCAPath, d.cfg.TLS.CA}, {TLSCertPath, d.cfg.TLS.Cert}, {TLSKeyPath, d.cfg.TLS.Key}} {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: m[0], Type: "bind", Source: m[1], Options: ro})
		}
	}
	hosts, resolv, err := d.gw.etcFiles(d.cfg.HostNetwork)
	if err != nil {
		return nil, err
	}
	etc := filepath.Join(dir, "etc")
	if err := os.Mkdir(etc, 0o755); err != nil {
		return nil, fmt.Errorf("etc: %w", err)
	}
	for _, f := range [][2]string{{"hosts", hosts}, {"resolv.conf", resolv}} {
		name, content := f[0], f[1]
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			return nil, fmt.Errorf("etc: %w", err)
		}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/etc/" + name, Type: "bind", Source: filepath.Join(etc, name), Options: ro})
	}
	if tok := sb.GetSpec().GetSandboxToken(); tok != "" {
		tokDir := filepath.Join(dir, "auth")
		if err := os.Mkdir(tokDir, 0o700); err != nil {
			return nil, fmt.Errorf("token directory: %w", err)
		}
		tokFile := filepath.Join(tokDir, "sandbox.jwt")
		if err := os.WriteFile(tokFile, []byte(tok), 0o400); err != nil {
			return nil, fmt.Errorf("token file: %w", err)
		}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: TokenPath, Type: "bind", Source: tokFile, Options: ro})
	}
	res, err := d.resources(sb.GetSpec().GetTemplate().GetResources())
	if err != nil {
		return nil, err
	}
	if s.Linux == nil {
		s.Linux = &specs.Linux{}
	}
	if s.Linux.Resources == nil {
		s.Linux.Resources = &specs.LinuxResources{}
	}
	s.Linux.Resources.CPU = res.CPU
	s.Linux.Resources.Memory = res.Memory
	s.Linux.Resources.Pids = &specs.LinuxPids{Limit: ptr(int64(SandboxPidsLimit))}
	// After the capabilities: the profile's CAP_SYS_ADMIN etc. rules are
	// chosen by the bounding set.
	if s.Linux.Seccomp, err = supervisorSeccomp(s); err != nil {
		return nil, fmt.Errorf("seccomp profile: %w", err)
	}
	if d.cfg.HostNetwork {
		ns := s.Linux.Namespaces[:0]
		for _, n := range s.Linux.Namespaces {
			if n.Type != specs.NetworkNamespace {
				ns = append(ns, n)
			}
		}
		s.Linux.Namespaces = ns
	}
	return s, nil
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
	return compactJSON(mp)
}
