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

// supervisorCaps are added to the base spec's capabilities: what
// OpenShell's Docker driver grants the supervisor (it sets up the agent's
// network namespace and its seccomp/Landlock sandbox itself).
var supervisorCaps = []string{"CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_SYS_PTRACE", "CAP_SYSLOG"}

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
	if c := s.Process.Capabilities; c != nil {
		c.Bounding = addCaps(c.Bounding)
		c.Effective = addCaps(c.Effective)
		c.Permitted = addCaps(c.Permitted)
	}
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

func addCaps(caps []string) []string {
	have := map[string]bool{}
	for _, c := range caps {
		have[c] = true
	}
	for _, c := range supervisorCaps {
		if !have[c] {
			caps = append(caps, c)
		}
	}
	return caps
}
