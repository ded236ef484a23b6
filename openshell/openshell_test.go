package openshell

import (
	"reflect"
	"strings"
	"testing"

	ispec "github.com/opencontainers/image-spec/specs-go/v1"

	pb "github.com/skillrun/skillrun/openshell/computev1"
)

func TestRefCandidates(t *testing.T) {
	for in, want := range map[string][]string{
		"ghcr.io/org/img:1.2": {"ghcr.io/org/img:1.2", "img:1.2", "1.2"},
		"busybox":             {"busybox", "busybox:latest", "latest"},
		"busybox:test":        {"busybox:test", "test"},
	} {
		if got := refCandidates(in); !reflect.DeepEqual(got, want) {
			t.Errorf("refCandidates(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestEnvironment: the Docker driver's environment (build_environment_for_oci_user):
// driver-owned variables win over the request's, the request cannot set
// the token or the TLS server name, the identity comes from the image's
// USER, and the image's own OPENSHELL_* variables are dropped.
func TestEnvironment(t *testing.T) {
	d := &Driver{cfg: Config{LogLevel: "info"}, gw: &gateway{endpoint: "https://gw:1", tls: true}}
	sb := &pb.DriverSandbox{Id: "i", Name: "n", Spec: &pb.DriverSandboxSpec{
		Environment: map[string]string{
			"PATH": "/evil", "OPENSHELL_SANDBOX_ID": "spoof", "A": "spec", "OPENSHELL_SANDBOX_TOKEN": "spoof",
			"OPENSHELL_GATEWAY_TLS_SERVER_NAME": "evil.example", "OPENSHELL_SANDBOX_UID": "0", "OPENSHELL_TLS_CA": "/evil", "HOME": "/home/x",
		},
		SandboxToken: "t",
		Command:      []string{"/bin/sh", "-c", "a<b && c>d"},
		Template:     &pb.DriverSandboxTemplate{Environment: map[string]string{"A": "tmpl", "B": "tmpl"}},
	}}
	img := &ispec.ImageConfig{User: "1000:1000", Env: []string{
		"IMG=1", "A=img", "OPENSHELL_SANDBOX_TOKEN=baked", "OPENSHELL_TLS_KEY=/baked", "OPENSHELL_GATEWAY_TLS_SERVER_NAME=baked", "OPENSHELL_POLICY_RULES=/baked",
	}}
	env := map[string]string{}
	for _, kv := range d.environment(sb, img) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	want := map[string]string{
		"PATH": supervisorSearchPath, "HOME": "/home/x", "TERM": "xterm", "OPENSHELL_SANDBOX_ID": "i", "OPENSHELL_SANDBOX": "n", "A": "spec", "B": "tmpl", "IMG": "1",
		"OPENSHELL_LOG_LEVEL": "info", "OPENSHELL_ENDPOINT": "https://gw:1", "OPENSHELL_SANDBOX_TOKEN_FILE": TokenPath,
		"OPENSHELL_SSH_SOCKET_PATH":              SSHSocketPath,
		"OPENSHELL_MAIN_PROCESS_SPEC":            `{"version":1,"command":["/bin/sh","-c","a<b && c>d"],"tty":false}`,
		"OPENSHELL_USER_ENVIRONMENT":             `{"A":"spec","B":"tmpl","HOME":"/home/x","OPENSHELL_GATEWAY_TLS_SERVER_NAME":"evil.example","OPENSHELL_SANDBOX_ID":"spoof","OPENSHELL_SANDBOX_TOKEN":"spoof","OPENSHELL_SANDBOX_UID":"0","OPENSHELL_TLS_CA":"/evil","PATH":"/evil"}`,
		"OPENSHELL_TELEMETRY_ENABLED":            "false",
		"OPENSHELL_NETWORK_RUNTIME_CAPABILITIES": "policy-dns-transparent-tcp",
		"OPENSHELL_TLS_CA":                       TLSCAPath, "OPENSHELL_TLS_CERT": TLSCertPath, "OPENSHELL_TLS_KEY": TLSKeyPath,
		"OPENSHELL_OCI_IMAGE_USER": "1000:1000", "OPENSHELL_SANDBOX_UID": "", "OPENSHELL_SANDBOX_GID": "",
	}
	if !reflect.DeepEqual(env, want) {
		for k := range env {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected %s=%q", k, env[k])
			}
		}
		for k, v := range want {
			if got, ok := env[k]; !ok || got != v {
				t.Errorf("%s=%q (set: %v), want %q", k, got, ok, v)
			}
		}
	}
	// An image without USER: the variable is there, empty; no TLS, no
	// token: none of their variables.
	d.gw.tls = false
	sb.Spec.SandboxToken = ""
	env = map[string]string{}
	for _, kv := range d.environment(sb, &ispec.ImageConfig{}) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if v, ok := env["OPENSHELL_OCI_IMAGE_USER"]; !ok || v != "" {
		t.Errorf("OPENSHELL_OCI_IMAGE_USER=%q (%v), want empty", v, ok)
	}
	for _, k := range []string{"OPENSHELL_SANDBOX_TOKEN_FILE", "OPENSHELL_SANDBOX_TOKEN", "OPENSHELL_GATEWAY_TLS_SERVER_NAME"} {
		if v, ok := env[k]; ok {
			t.Errorf("%s=%q without a token", k, v)
		}
	}
	if env["OPENSHELL_TLS_CA"] != "/evil" {
		t.Errorf("without TLS the request's OPENSHELL_TLS_CA passes, as with the Docker driver: %q", env["OPENSHELL_TLS_CA"])
	}
}
