// Package darwin is skillrun's macOS back end: the OCI config translated to
// a Seatbelt profile and run with /usr/bin/sandbox-exec.
package darwin
