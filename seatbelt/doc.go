// Package seatbelt translates an OCI runtime configuration into a macOS
// Seatbelt profile (SBPL) for /usr/bin/sandbox-exec, and classifies every
// OCI field as enforced, degraded or rejected on macOS.
//
// The package is pure Go with no build tags, so it is tested on any host:
// the file system it consults to canonicalise paths is injected (FS), and
// the host-specific details (darwin's /tmp, /var and /etc symbolic links)
// are built in rather than read from the machine running the tests.
//
// Two rules shape the generated profile:
//
//   - deny by default: the base allows only what a process needs to start
//     (dyld and the shared cache, system libraries and frameworks, a few
//     devices, the sysctl reads the C, Go and Python runtimes make), and
//     everything else comes from the spec's root, mounts and network
//     namespace;
//   - no path is spliced into the profile text: every path taken from the
//     spec is passed as a sandbox-exec `-D KEY=VALUE` parameter and referred
//     to as (param "KEY"), so quotes, parentheses or newlines in a path can
//     never change the policy. The static text is checked as a well-formed
//     s-expression with only known operations before FromSpec returns it.
//
// Explain returns the classification of every field of a spec as JSON-able
// data; FromSpec refuses a spec with rejected fields unless
// Options.AcceptDegradation is set. Fields returns the catalogue the
// classification is built from (docs/macos.md is generated from it).
package seatbelt
