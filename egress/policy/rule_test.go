package policy

import (
	"net/netip"
	"testing"
)

func TestParseRule(t *testing.T) {
	for in, want := range map[string]Rule{
		"api.github.com:443":   {"api.github.com", 443},
		"API.GitHub.com.:80":   {"api.github.com", 80},
		"example.com":          {"example.com", 443},
		"*.example.org:8443":   {"*.example.org", 8443},
		"under_score.test:1":   {"under_score.test", 1},
		"localhost:65535":      {"localhost", 65535},
		"xn--bcher-kva.ch:443": {"xn--bcher-kva.ch", 443},
	} {
		got, err := ParseRule(in)
		if err != nil || got != want {
			t.Errorf("ParseRule(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", ":443", "a.b:", "a.b:0", "a.b:65536", "a.b:+1", "a.b:08", "1.2.3.4:443", "1.2.3.4", "[::1]:443", "::1",
		"*.com:443", "*:443", "a.*.b:1", "**.a.b:1", "*.*.a.b:1", "a..b:1", "-a.b:1", "a-.b:1", "a b:1", "a/b:1", "a.b:1:2",
		"ä.de:443", string(make([]byte, 64)) + ".de:1",
	} {
		if r, err := ParseRule(in); err == nil {
			t.Errorf("ParseRule(%q) = %v, want an error", in, r)
		}
	}
}

func TestRuleMatch(t *testing.T) {
	wild, _ := ParseRule("*.example.org:443")
	exact, _ := ParseRule("api.github.com:443")
	for _, tc := range []struct {
		r    Rule
		name string
		port int
		want bool
	}{
		{wild, "a.example.org", 443, true},
		{wild, "a.b.example.org", 443, true},
		{wild, "example.org", 443, false},
		{wild, "example.org.evil.com", 443, false},
		{wild, "aexample.org", 443, false},
		{wild, "a.example.org", 80, false},
		{wild, "a.example.org.", 443, false}, // names are normalised before matching
		{exact, "api.github.com", 443, true},
		{exact, "api.github.com", 4430, false},
		{exact, "x.api.github.com", 443, false},
		{exact, "github.com", 443, false},
	} {
		if got := tc.r.Match(tc.name, tc.port); got != tc.want {
			t.Errorf("%v.Match(%q, %d) = %v", tc.r, tc.name, tc.port, got)
		}
	}
}

func TestParseResolve(t *testing.T) {
	hp, a, err := ParseResolve("Api.Test:8080:127.0.0.1")
	if err != nil || hp != "api.test:8080" || a != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("got %q %v %v", hp, a, err)
	}
	if hp, a, err = ParseResolve("a.test:443:[::1]"); err != nil || hp != "a.test:443" || a != netip.MustParseAddr("::1") {
		t.Errorf("got %q %v %v", hp, a, err)
	}
	for _, bad := range []string{"a.test", "a.test:443", "a.test:443:", "*.a.test:443:1.2.3.4", "a.test:x:1.2.3.4", "a.test:443:example.com"} {
		if _, _, err := ParseResolve(bad); err == nil {
			t.Errorf("ParseResolve(%q) accepted", bad)
		}
	}
}

func TestIsPublic(t *testing.T) {
	for s, want := range map[string]bool{
		"93.184.216.34": true, "140.82.112.3": true, "2606:4700::1111": true,
		"127.0.0.1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false, "169.254.169.254": false,
		"100.64.0.1": false, "0.0.0.0": false, "198.18.0.2": false, "224.0.0.1": false, "255.255.255.255": false,
		"::1": false, "::": false, "fe80::1": false, "fd00:ec2::254": false, "::ffff:127.0.0.1": false,
		"::ffff:10.0.0.1": false, "64:ff9b::a00:1": false, "2002:a00:1::": false, "ff02::1": false,
	} {
		if got := IsPublic(netip.MustParseAddr(s)); got != want {
			t.Errorf("IsPublic(%s) = %v", s, got)
		}
	}
}
