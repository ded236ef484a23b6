package openshell

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/egress/policy"
	pb "github.com/skillrun/skillrun/openshell/computev1"
	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/fake"
)

// TestGateway: the endpoint's names, address, annotations and listener
// requirements, and the configurations New refuses.
func TestGateway(t *testing.T) {
	tlsFiles := testTLS(t)
	for _, tc := range []struct {
		endpoint, addr string
		hostNet        bool
		tls            TLSFiles
		want           string // endpoint allow resolve requirement, or the error
	}{
		{"https://host.openshell.internal:8080", "", false, tlsFiles,
			"https://host.openshell.internal:8080 host.openshell.internal:8080 host.openshell.internal:8080:127.0.0.1 loopback"},
		{"https://Gateway.Example:8443/", "", false, tlsFiles,
			"https://Gateway.Example:8443/ host.openshell.internal:8443,gateway.example:8443 host.openshell.internal:8443:127.0.0.1,gateway.example:8443:127.0.0.1 loopback"},
		{"https://127.0.0.1:17670", "", false, tlsFiles,
			"https://host.openshell.internal:17670 host.openshell.internal:17670 host.openshell.internal:17670:127.0.0.1 loopback"},
		{"https://gw.example", "203.0.113.7", false, tlsFiles,
			"https://gw.example host.openshell.internal:443,gw.example:443 host.openshell.internal:443:203.0.113.7,gw.example:443:203.0.113.7 none"},
		{"https://[::1]:9000", "", false, tlsFiles,
			"https://host.openshell.internal:9000 host.openshell.internal:9000 host.openshell.internal:9000:::1 none"},
		{"http://127.0.0.1:8080", "", true, TLSFiles{},
			"http://host.openshell.internal:8080 host.openshell.internal:8080 host.openshell.internal:8080:127.0.0.1 loopback"},
		{"", "", false, tlsFiles, "openshell driver: no gateway endpoint (--endpoint)"},
		{"grpc://gw:1", "", false, tlsFiles, `endpoint "grpc://gw:1": want an http:// or https:// URL`},
		{"https://u:p@gw:1", "", false, tlsFiles, `endpoint "https://u:p@gw:1": want scheme://host[:port]`},
		{"https://gw:0", "", false, tlsFiles, `endpoint "https://gw:0": bad port "0"`},
		{"https://gw_:1", "", false, tlsFiles, ""}, // '_' is allowed in names
		{"https://-gw:1", "", false, tlsFiles, `endpoint "https://-gw:1": host name "-gw" has a label that starts or ends with '-'`},
		{"https://10.0.0.1:1", "10.0.0.2", false, tlsFiles, `endpoint "https://10.0.0.1:1" names 10.0.0.1, --gateway-address 10.0.0.2`},
		{"https://gw:1", "", false, TLSFiles{}, "https endpoint https://gw:1: TLS: the CA, the client certificate and its key are all needed (--tls-ca, --tls-cert, --tls-key, or --tls-dir)"},
		{"https://gw:1", "", false, TLSFiles{CA: tlsFiles.CA, Cert: tlsFiles.Cert}, "https endpoint https://gw:1: TLS: the CA, the client certificate and its key are all needed (--tls-ca, --tls-cert, --tls-key, or --tls-dir)"},
		{"https://gw:1", "", false, TLSFiles{CA: tlsFiles.Key, Cert: tlsFiles.Cert, Key: tlsFiles.Key}, "https endpoint https://gw:1: TLS CA " + tlsFiles.Key + ": no PEM certificate in it"},
		{"https://gw:1", "", false, TLSFiles{CA: tlsFiles.CA, Cert: tlsFiles.CA, Key: tlsFiles.Key}, "https endpoint https://gw:1: TLS client certificate " + tlsFiles.CA + " and key " + tlsFiles.Key + ": tls: private key does not match public key"},
		{"http://gw:1", "", true, tlsFiles, `endpoint "http://gw:1": TLS files are given but the endpoint is not https://`},
		{"http://gw:1", "", false, TLSFiles{}, `endpoint "http://gw:1": the egress allowlist cannot pass plaintext gRPC (it carries no host name to check): use an https:// endpoint with TLS files, or --host-network`},
	} {
		cfg := &Config{Endpoint: tc.endpoint, TLS: tc.tls, HostNetwork: tc.hostNet}
		if tc.addr != "" {
			cfg.GatewayAddress = netip.MustParseAddr(tc.addr)
		}
		g, err := newGateway(cfg)
		var got string
		if err != nil {
			got = err.Error()
		} else {
			req := "none"
			if r := g.listenerRequirements(); len(r) == 1 && r[0].GetLoopbackInterface() != nil {
				req = "loopback"
			} else if len(r) == 1 {
				req = r[0].GetExactBindAddress()
			}
			got = strings.Join([]string{g.endpoint, g.allow(), g.resolve(), req}, " ")
			if _, err := policy.FromAnnotations(g.allow(), g.resolve()); err != nil {
				t.Errorf("%s: the annotations are not a policy: %v", tc.endpoint, err)
			}
			if tc.want == "" {
				continue
			}
		}
		if got != tc.want {
			t.Errorf("%q (address %q):\n got %s\nwant %s", tc.endpoint, tc.addr, got, tc.want)
		}
	}
	// TLSDir: generate-certs' layout, or the CLI's flat mtls directory.
	flat := t.TempDir()
	for _, f := range []string{"ca.crt", "tls.crt", "tls.key"} {
		os.WriteFile(filepath.Join(flat, f), nil, 0o600)
	}
	if got := TLSDir(flat); got != (TLSFiles{filepath.Join(flat, "ca.crt"), filepath.Join(flat, "tls.crt"), filepath.Join(flat, "tls.key")}) {
		t.Errorf("TLSDir of a flat directory: %+v", got)
	}
	if got := TLSDir(filepath.Dir(tlsFiles.CA)); got != tlsFiles {
		t.Errorf("TLSDir of generate-certs' directory: %+v, want %+v", got, tlsFiles)
	}
}

// TestCreateSpecNetwork: by default the sandbox keeps its network
// namespace, and its config carries the egress annotations, the DNS and
// hosts files that send the gateway's names to the egress server, and the
// TLS files, read-only, with their variables.
func TestCreateSpecNetwork(t *testing.T) {
	cfg := testConfig(t, fake.New())
	d := newDriver(t, cfg)
	if _, err := d.CreateSandbox(testCtx(t), &pb.CreateSandboxRequest{Sandbox: newSandbox("net")}); err != nil {
		t.Fatal(err)
	}
	spec, err := runtime.LoadBundle(d.bundleDir("net"))
	if err != nil {
		t.Fatal(err)
	}
	hasNet := false
	for _, ns := range spec.Linux.Namespaces {
		hasNet = hasNet || (ns.Type == specs.NetworkNamespace && ns.Path == "")
	}
	if !hasNet {
		t.Errorf("no network namespace of its own: %v", spec.Linux.Namespaces)
	}
	if got := spec.Annotations[policy.AnnotationAllow]; got != "host.openshell.internal:8443,gateway.test:8443" {
		t.Errorf("allow annotation %q", got)
	}
	if got := spec.Annotations[policy.AnnotationResolve]; got != "host.openshell.internal:8443:127.0.0.1,gateway.test:8443:127.0.0.1" {
		t.Errorf("resolve annotation %q", got)
	}
	for name, want := range map[string]string{
		"hosts":       "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"resolv.conf": "nameserver 127.0.0.1\noptions attempts:2 timeout:2\n",
	} {
		if b, err := os.ReadFile(filepath.Join(d.sandboxDir("net"), "etc", name)); err != nil || string(b) != want {
			t.Errorf("etc/%s: %q, %v; want %q", name, b, err, want)
		}
	}
	env := strings.Join(spec.Process.Env, "\n") + "\n"
	for _, want := range []string{"OPENSHELL_ENDPOINT=" + testEndpoint + "\n", "OPENSHELL_TLS_CA=" + TLSCAPath + "\n", "OPENSHELL_TLS_CERT=" + TLSCertPath + "\n", "OPENSHELL_TLS_KEY=" + TLSKeyPath + "\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %q", want)
		}
	}
}
