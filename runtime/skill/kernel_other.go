//go:build !linux

package skill

// nprocPerUserNS is false: only Linux has user namespaces.
func nprocPerUserNS() bool { return false }
