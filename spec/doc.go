// Package spec turns an Agent Skill folder into a hardened OCI runtime
// spec.
//
// Load parses a skill folder: SKILL.md (YAML front matter per the Agent
// Skills specification, body kept), the optional sandbox manifest
// sandbox.yaml next to it, the entry point (declared or found by
// convention) and the input schema (declared, inferred from Python
// argparse calls by package spec/argparse, or "any object"). Resolve
// applies the operator's Grants to the manifest's requests and returns
// the effective Policy; Generate builds a specs.Spec for a target platform
// ("linux" or "darwin", an argument so Linux CI can test darwin specs)
// from a Skill and functional options; Validate checks a generated spec
// against the hardened profile; WriteBundle writes an OCI bundle
// atomically.
//
// The package is pure: no logging, no CLI, no runc or server imports (the
// network rule grammar comes from the leaf egress/policy), no device
// nodes, mounts or processes, and no global mutable state. It reads the
// host only where the caller asks it to (the skill folder, and the host's
// runtime directories when generating a Linux spec, which tests replace
// with WithHostLayout) and writes only the bundle files it is asked to
// write. The host preparation a bundle can use (the device folder bound at
// /dev) belongs to the Linux back end (runtime/linux/devdir).
package spec
