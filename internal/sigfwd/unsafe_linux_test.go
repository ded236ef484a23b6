//go:build linux && cgo

package sigfwd

import "unsafe"

func uintptrOf(p *[4]uintptr) uintptr { return uintptr(unsafe.Pointer(p)) }
