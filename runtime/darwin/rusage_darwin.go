//go:build darwin

package darwin

// maxRSSUnit is the unit of Rusage.Maxrss in bytes: bytes on macOS.
const maxRSSUnit = 1
