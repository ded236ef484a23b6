//go:build !linux || !cgo

package holder

// Linked reports whether this binary runs the holder itself: never
// without cgo or off Linux (the runner's shell holder serves instead).
func Linked() bool { return false }
