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

func TestEnvironment(t *testing.T) {
	d := &Driver{cfg: Config{Endpoint: "http://gw:1/", LogLevel: "info"}}
	sb := &pb.DriverSandbox{Id: "i", Name: "n", Spec: &pb.DriverSandboxSpec{
		Environment:  map[string]string{"PATH": "/evil", "OPENSHELL_SANDBOX_ID": "spoof", "A": "spec"},
		SandboxToken: "t",
		Template:     &pb.DriverSandboxTemplate{Environment: map[string]string{"A": "tmpl", "B": "tmpl"}},
	}}
	env := map[string]string{}
	for _, kv := range d.environment(sb, &ispec.ImageConfig{Env: []string{"IMG=1", "A=img"}}) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for k, want := range map[string]string{
		"PATH": supervisorSearchPath, "OPENSHELL_SANDBOX_ID": "i", "OPENSHELL_SANDBOX": "n", "A": "spec", "B": "tmpl", "IMG": "1",
		"OPENSHELL_LOG_LEVEL": "info", "OPENSHELL_ENDPOINT": "http://gw:1/", "OPENSHELL_SANDBOX_TOKEN_FILE": TokenPath,
		"OPENSHELL_MAIN_PROCESS_SPEC": `{"version":1,"command":["/bin/bash","-l"],"tty":true}`,
	} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
}
