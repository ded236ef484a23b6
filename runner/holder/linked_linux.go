//go:build linux && cgo

package holder

// int skillrun_input_holder_linked(void);
import "C"

// Linked reports whether this binary runs the holder itself: built with
// cgo on Linux, for a C library that hands constructors the program's
// arguments (glibc).
func Linked() bool { return C.skillrun_input_holder_linked() != 0 }
