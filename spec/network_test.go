package spec

import (
	"errors"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/egress/policy"
)

func TestNetworkAllowlistPolicy(t *testing.T) {
	fetch := loadExample(t, "fetch-url") // declares example.com:443, api.github.com:443
	base := []Option{WithHostLayout(testLayout), WithHostID(1000, 1000)}

	p, err := Resolve(fetch, WithGrants(Grants{Network: NetworkAllow}))
	if err != nil {
		t.Fatal(err)
	}
	if p.Network != NetworkAllowlist || !slices.Equal(p.Hosts, []string{"example.com:443", "api.github.com:443"}) || len(p.Warnings) != 0 {
		t.Errorf("--network allow: %+v", p)
	}
	// Narrowing: only what --allow-host names, the rest reported.
	p, err = Resolve(fetch, WithGrants(Grants{AllowHosts: []string{"API.GitHub.com:443"}}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Hosts, []string{"api.github.com:443"}) || len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "example.com:443") {
		t.Errorf("narrowed: %+v", p)
	}
	// Widening is explicit and warned about.
	p, err = Resolve(fetch, WithGrants(Grants{Network: NetworkAllow}), WithGrants(Grants{AllowHosts: []string{"*.example.org:8443"}}))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Hosts) != 3 || len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "*.example.org:8443") {
		t.Errorf("widened: %+v", p)
	}
	for _, tc := range []struct {
		name string
		opts []Option
		want string
	}{
		{"allow-host with host network", []Option{WithGrants(Grants{Network: NetworkHost}), WithGrants(Grants{AllowHosts: []string{"a.b:1"}})}, "--allow-host"},
		{"resolve with host network", []Option{WithGrants(Grants{Network: NetworkHost}), WithGrants(Grants{Resolve: []string{"a.b:1:127.0.0.1"}})}, "--resolve"},
		{"resolve of a host not granted", []Option{WithGrants(Grants{Network: NetworkAllow}), WithGrants(Grants{Resolve: []string{"other.org:443:127.0.0.1"}})}, "not a granted host"},
		{"nothing granted", nil, "--network allow"},
	} {
		_, err := Resolve(fetch, tc.opts...)
		if !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want a policy refusal naming %s", tc.name, err, tc.want)
		}
	}
	for _, bad := range []string{"1.2.3.4:443", "[::1]:443", "a.b:0", "a.b:99999", "*.org:443", "a..b:1", "-a.b:1", "a b:1"} {
		if _, err := Resolve(fetch, WithGrants(Grants{AllowHosts: []string{bad}})); err == nil || errors.Is(err, ErrPolicy) {
			t.Errorf("--allow-host %q: err = %v, want a usage error", bad, err)
		}
	}
	if _, err := Resolve(fetch, WithGrants(Grants{Network: NetworkAllow}), WithGrants(Grants{Resolve: []string{"api.github.com:443:nope"}})); err == nil {
		t.Error("--resolve with a bad address accepted")
	}

	sp, err := Generate(fetch, "linux", append(base, WithGrants(Grants{Network: NetworkAllow}), WithGrants(Grants{Resolve: []string{"api.github.com:443:127.0.0.1"}}))...)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(sp.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.NetworkNamespace && n.Path == "" }) {
		t.Error("allowlist without a network namespace of its own")
	}
	if got := sp.Annotations[policy.AnnotationAllow]; got != "example.com:443,api.github.com:443" {
		t.Errorf("allow annotation = %q", got)
	}
	if got := sp.Annotations[policy.AnnotationResolve]; got != "api.github.com:443:127.0.0.1" {
		t.Errorf("resolve annotation = %q", got)
	}
	if sp.Annotations[AnnotationNetwork] != NetworkAllowlist || !strings.Contains(sp.Annotations[AnnotationEtcGenerate], "resolv.conf") {
		t.Errorf("annotations = %v", sp.Annotations)
	}
	// HTTPS clients verify certificates: the CA folders are bound; the
	// host's resolv.conf is not copied (the allowlist generates its own).
	if !slices.ContainsFunc(sp.Mounts, func(m specs.Mount) bool { return m.Destination == "/etc/ssl" && m.Source == "/etc/ssl" }) {
		t.Errorf("allowlist without the CA certificates (/etc/ssl): %v", sp.Mounts)
	}
	if strings.Contains(sp.Annotations[AnnotationEtcCopy], "resolv.conf") {
		t.Errorf("allowlist copies the host's resolv.conf: %q", sp.Annotations[AnnotationEtcCopy])
	}
	if none, err := Generate(loadExample(t, "calculator"), "linux", base...); err != nil || slices.ContainsFunc(none.Mounts, func(m specs.Mount) bool { return m.Destination == "/etc/ssl" }) {
		t.Errorf("a skill without network gets /etc/ssl (err %v)", err)
	}
	if !slices.Contains(sp.Process.Env, "HTTPS_PROXY="+ProxyURL) {
		t.Errorf("env = %v", sp.Process.Env)
	}
	if err := Validate(sp); err != nil {
		t.Errorf("allowlist spec breaks the profile: %v", err)
	}
}

func TestManifestNetworkHosts(t *testing.T) {
	for _, h := range []string{"1.2.3.4:443", "*.com:443", "a.b:70000", "a_b..c"} {
		m := &Manifest{Network: ManifestNetwork{Hosts: []string{h}}}
		if err := m.check(); err == nil || !strings.Contains(err.Error(), "network.hosts") {
			t.Errorf("network.hosts %q: err = %v", h, err)
		}
	}
	m := &Manifest{Network: ManifestNetwork{Hosts: []string{"api.github.com", "*.example.org:8443"}}}
	if err := m.check(); err != nil {
		t.Error(err)
	}
}
