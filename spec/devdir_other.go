//go:build !linux

package spec

// CheckDevDir: device folders are Linux's (see HostDevDir).
func CheckDevDir(string) error { return ErrDevDirUnsupported }

// EnsureDevDir: device folders are Linux's (see HostDevDir).
func EnsureDevDir(string) error { return ErrDevDirUnsupported }
