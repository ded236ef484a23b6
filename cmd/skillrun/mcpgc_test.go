//go:build !runtimeonly

package main

import (
	"runtime/debug"
	"testing"
)

// serverGC sets the server's GOGC unless the environment sets one.
func TestServerGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	serverGC(func(string) (string, bool) { return "", false })
	if got := debug.SetGCPercent(100); got != serverGCPercent {
		t.Errorf("GOGC unset: the collector's percent is %d, want %d", got, serverGCPercent)
	}
	serverGC(func(k string) (string, bool) { return "50", k == "GOGC" })
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=50 in the environment: serverGC changed the percent to %d", got)
	}
}
