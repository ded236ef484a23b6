package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// DefaultPort is the port of a rule written without one ("api.github.com"
// means "api.github.com:443").
const DefaultPort = 443

// Rule allows connections to one host name, or to every name under a
// domain ("*.example.org"), on one port.
type Rule struct {
	// Host is a lower-case host name without a trailing dot, or "*."
	// followed by one.
	Host string
	// Port is the TCP port, 1-65535.
	Port int
}

// String returns "host:port".
func (r Rule) String() string { return r.Host + ":" + strconv.Itoa(r.Port) }

// Wildcard reports whether the rule is "*.domain".
func (r Rule) Wildcard() bool { return strings.HasPrefix(r.Host, "*.") }

// MatchName reports whether name (already normalised: see NormalizeName)
// is the rule's host or, for "*.domain", a name of one or more labels
// under domain (never domain itself).
func (r Rule) MatchName(name string) bool {
	if d, ok := strings.CutPrefix(r.Host, "*."); ok {
		return len(name) > len(d)+1 && strings.HasSuffix(name, "."+d)
	}
	return name == r.Host
}

// Match reports whether the rule allows name on port.
func (r Rule) Match(name string, port int) bool { return port == r.Port && r.MatchName(name) }

// ParseRule parses "host", "host:port" or "*.domain:port". Host names are
// letters, digits, '-' and '_' in dot-separated labels of 1-63
// characters, at most 253 in all, case-insensitive; IP addresses are
// refused (a rule names a host; its address is found on the host side).
func ParseRule(s string) (Rule, error) {
	host, port := s, DefaultPort
	if h, p, ok := strings.Cut(s, ":"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 || p != strconv.Itoa(n) {
			return Rule{}, fmt.Errorf("%q: port %q is not a number from 1 to 65535", s, p)
		}
		host, port = h, n
	}
	if strings.HasPrefix(host, "[") || strings.Count(s, ":") > 1 {
		return Rule{}, fmt.Errorf("%q: IP addresses are not allowed, name a host", s)
	}
	wild := false
	if d, ok := strings.CutPrefix(host, "*."); ok {
		wild, host = true, d
	}
	name, err := NormalizeName(host)
	if err != nil {
		return Rule{}, fmt.Errorf("%q: %w", s, err)
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return Rule{}, fmt.Errorf("%q: IP addresses are not allowed, name a host", s)
	}
	if wild {
		if !strings.Contains(name, ".") {
			return Rule{}, fmt.Errorf("%q: a wildcard needs a domain of at least two labels (*.example.org)", s)
		}
		name = "*." + name
	}
	return Rule{Host: name, Port: port}, nil
}

// ParseRules parses each of list (see ParseRule) and drops duplicates.
func ParseRules(list []string) ([]Rule, error) {
	var rules []Rule
	seen := map[Rule]bool{}
	var errs []error
	for _, s := range list {
		r, err := ParseRule(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !seen[r] {
			seen[r] = true
			rules = append(rules, r)
		}
	}
	return rules, errors.Join(errs...)
}

// NormalizeName lower-cases a host name, strips one trailing dot and
// checks its syntax: dot-separated labels of 1-63 letters, digits, '-' or
// '_' that neither start nor end with '-', at most 253 characters.
func NormalizeName(name string) (string, error) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if name == "" {
		return "", errors.New("empty host name")
	}
	if len(name) > 253 {
		return "", fmt.Errorf("host name longer than 253 characters")
	}
	for _, l := range strings.Split(name, ".") {
		if l == "" || len(l) > 63 {
			return "", fmt.Errorf("host name %q has an empty label or one longer than 63 characters", name)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", fmt.Errorf("host name %q has a label that starts or ends with '-'", name)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("host name %q has a character other than letters, digits, '-', '_'", name)
			}
		}
	}
	return name, nil
}

// ParseResolve parses an operator mapping "name:port:address" (curl's
// --resolve): connections the policy allows to name:port go to address,
// whatever it is (a loopback or private address included), and name is
// not looked up.
func ParseResolve(s string) (string, netip.Addr, error) {
	i := strings.Index(s, ":")
	if i < 0 {
		return "", netip.Addr{}, fmt.Errorf("%q is not NAME:PORT:ADDRESS", s)
	}
	j := strings.Index(s[i+1:], ":")
	if j < 0 {
		return "", netip.Addr{}, fmt.Errorf("%q is not NAME:PORT:ADDRESS", s)
	}
	hp, a := s[:i+1+j], s[i+2+j:]
	r, err := ParseRule(hp)
	if err != nil || r.Wildcard() || !strings.Contains(hp, ":") {
		return "", netip.Addr{}, fmt.Errorf("%q: %q is not NAME:PORT", s, hp)
	}
	addr, err := netip.ParseAddr(strings.Trim(a, "[]"))
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("%q: %q is not an IP address", s, a)
	}
	return r.String(), addr.Unmap(), nil
}
