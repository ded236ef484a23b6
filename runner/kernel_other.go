//go:build !linux

package runner

// nprocPerUserNS is false: only Linux has user namespaces.
func nprocPerUserNS() bool { return false }
