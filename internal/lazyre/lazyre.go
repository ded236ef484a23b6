// Package lazyre compiles a package's regular expressions at their first
// use, not at package init: every skillrun process (each runtime verb
// containerd's shim calls, each container's init) pays the package inits
// of everything linked in, and most never match a manifest or a
// requirement line.
package lazyre

import (
	"regexp"
	"sync"
)

// New returns a function that compiles expr once, on its first call (safe
// for concurrent first calls), and then returns the same *regexp.Regexp.
// An invalid expr panics at that first call, as regexp.MustCompile would
// at init; the package's tests call each one.
func New(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
