package policy

import (
	"context"
	"errors"
	"net/netip"
	"sort"
	"strings"
)

// AnnotationAllow on an OCI spec asks for a per-host network allowlist
// (comma-separated host:port rules, see ParseRule) instead of an empty
// network namespace. It is how a bundle written to disk (and run by
// containerd, podman or `skillrun run`) carries its policy; inside one
// process the policy travels as a value.
const AnnotationAllow = "run.skillrun.network.allow"

// AnnotationResolve maps allowed names to addresses for such a spec
// (comma-separated name:port:address, like curl's --resolve).
const AnnotationResolve = "run.skillrun.network.resolve"

// Policy is what a sandbox may reach.
type Policy struct {
	// Rules are the allowed host:port pairs.
	Rules []Rule
	// Resolve maps "name:port" to the address connections go to,
	// instead of looking the name up; a mapped address may be private.
	Resolve map[string]netip.Addr
	// LookupNetIP resolves a name on the host; nil uses net.DefaultResolver.
	LookupNetIP func(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// AllowsName reports whether some rule allows name on some port.
func (p *Policy) AllowsName(name string) bool {
	for _, r := range p.Rules {
		if r.MatchName(name) {
			return true
		}
	}
	return false
}

// Allows reports whether some rule allows name:port.
func (p *Policy) Allows(name string, port int) bool {
	for _, r := range p.Rules {
		if r.Match(name, port) {
			return true
		}
	}
	return false
}

// Ports returns the distinct ports of the rules, sorted.
func (p *Policy) Ports() []int {
	seen := map[int]bool{}
	var ports []int
	for _, r := range p.Rules {
		if !seen[r.Port] {
			seen[r.Port] = true
			ports = append(ports, r.Port)
		}
	}
	sort.Ints(ports)
	return ports
}

// FromAnnotations builds the policy of a spec's allowlist annotations:
// allow is comma-separated rules, resolve comma-separated
// name:port:address mappings.
func FromAnnotations(allow, resolve string) (*Policy, error) {
	var list []string
	if allow != "" {
		list = strings.Split(allow, ",")
	}
	return FromLists(list, splitList(resolve))
}

// FromLists builds a policy from rules and name:port:address mappings,
// each already a list.
func FromLists(allow, resolve []string) (*Policy, error) {
	rules, err := ParseRules(allow)
	if err != nil {
		return nil, err
	}
	if len(rules) == 0 {
		return nil, errors.New("no host is allowed")
	}
	p := &Policy{Rules: rules}
	if len(resolve) > 0 {
		p.Resolve = map[string]netip.Addr{}
		for _, m := range resolve {
			hp, a, err := ParseResolve(m)
			if err != nil {
				return nil, err
			}
			p.Resolve[hp] = a
		}
	}
	return p, nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
