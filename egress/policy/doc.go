// Package policy is the network allowlist's grammar, a leaf: host:port
// rules ("api.github.com", "*.example.org:8443"), the operator's
// name:port:address mappings, the Policy value the egress server enforces,
// the OCI annotations that carry a policy in a bundle on disk, and which
// addresses count as public. It is pure: spec and skillenv import it
// instead of the egress server.
package policy
