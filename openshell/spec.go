package openshell

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	ispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

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

var hostnamePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// workspaceRoot is where the persistent workspace is mounted: the image's
// WorkingDir, or /sandbox when it has none.
func workspaceRoot(workdir string) string {
	if workdir == "" || path.Clean(workdir) == "/" || !path.IsAbs(workdir) {
		return DefaultWorkspaceRoot
	}
	return path.Clean(workdir)
}

// environment is the sandbox's environment, as OpenShell's Docker driver
// builds it: image variables, then the fixed supervisor ones, then the
// template's and the spec's (the spec wins), then the driver-owned ones
// that must not be overridden.
func (d *Driver) environment(sb *pb.DriverSandbox, img *ispec.ImageConfig) []string {
	env := map[string]string{}
	for _, kv := range img.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
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
		data, _ := json.Marshal(user)
		env["OPENSHELL_USER_ENVIRONMENT"] = string(data)
	}
	env["OPENSHELL_ENDPOINT"] = d.cfg.Endpoint
	env["OPENSHELL_SANDBOX_ID"] = sb.GetId()
	env["OPENSHELL_SANDBOX"] = sb.GetName()
	env["OPENSHELL_SSH_SOCKET_PATH"] = SSHSocketPath
	env["OPENSHELL_MAIN_PROCESS_SPEC"] = mainProcessSpec(spec)
	env["OPENSHELL_TELEMETRY_ENABLED"] = "false"
	env["PATH"] = supervisorSearchPath
	delete(env, "OPENSHELL_SANDBOX_TOKEN_FILE")
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

// buildSpec writes the sandbox's token file and workspace directory and
// returns its config.json.
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
	if hostnamePattern.MatchString(sb.GetName()) {
		s.Hostname = sb.GetName()
	}
	s.Annotations = map[string]string{}
	for k, v := range sb.GetSpec().GetTemplate().GetLabels() {
		s.Annotations[k] = v
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
	if d.cfg.SupervisorBin != "" {
		s.Mounts = append(s.Mounts, specs.Mount{Destination: SupervisorPath, Type: "bind", Source: d.cfg.SupervisorBin, Options: []string{"bind", "ro", "nosuid", "nodev"}})
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
		s.Mounts = append(s.Mounts, specs.Mount{Destination: TokenPath, Type: "bind", Source: tokFile, Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}})
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
	data, _ := json.Marshal(mp)
	return string(data)
}
