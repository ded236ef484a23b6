package openshell

import (
	"reflect"
	"strings"
	"testing"

	ispec "github.com/opencontainers/image-spec/specs-go/v1"

	pb "github.com/skillrun/skillrun/openshell/computev1"
)

func TestParseQuantity(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "64Mi": 64 << 20, "1Gi": 1 << 30, "1G": 1e9, "1.5Ki": 1536, "100k": 1e5, "0.5": 1} {
		got, err := parseBytes(in)
		if err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]int64{"500m": 500, "2": 2000, "0.25": 250, "1m": 1, "0.0001": 1} {
		got, err := parseMilliCPU(in)
		if err != nil || got != want {
			t.Errorf("parseMilliCPU(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lots", "-1", "1e3", "Mi", "1 Gi", "0", "1/2", "99999999999Ei"} {
		if n, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", in, n)
		}
	}
}

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
