//go:build linux

package darwin

// maxRSSUnit is the unit of Rusage.Maxrss in bytes: KiB on Linux.
const maxRSSUnit = 1024
