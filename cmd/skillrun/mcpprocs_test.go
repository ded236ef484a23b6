//go:build !runtimeonly

package main

import (
	"runtime"
	"testing"
)

// serverProcs runs Go on one processor while the server is not busy and
// on the default number while it is, unless the environment sets
// GOMAXPROCS.
func TestServerProcs(t *testing.T) {
	defer runtime.SetDefaultGOMAXPROCS()
	if f := serverProcs(func(k string) (string, bool) { return "3", k == "GOMAXPROCS" }); f != nil {
		t.Error("GOMAXPROCS in the environment: serverProcs returned a func")
	}
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	f := serverProcs(func(string) (string, bool) { return "", false })
	if def < 2 {
		if f != nil {
			t.Error("one processor: serverProcs returned a func")
		}
		t.Skipf("skipped: this host runs Go on %d processor (nothing to switch)", def)
	}
	if f == nil {
		t.Fatal("GOMAXPROCS unset, 2+ processors: no func")
	}
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("not busy: GOMAXPROCS %d, want 1", n)
	}
	f(true)
	if n := runtime.GOMAXPROCS(0); n != def {
		t.Errorf("busy: GOMAXPROCS %d, want the default %d", n, def)
	}
	f(false)
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("not busy again: GOMAXPROCS %d, want 1", n)
	}
}
