//go:build darwin || linux

package darwin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/runtimetest"
)

// TestConformance runs the suite every back end runs. On Linux the engine
// runs the process without sandbox-exec (testEngine); the state machine,
// fifo handshake, locking and errors are the darwin back end's own.
func TestConformance(t *testing.T) {
	runtimetest.Run(t, runtimetest.Harness{
		New: func(t *testing.T) runtime.Runtime {
			e, _ := testEngine(t, Config{})
			return e
		},
		Bundle: func(t *testing.T, args ...string) string {
			dir := t.TempDir()
			s := testSpec(dir, "")
			s.Process.Args = args
			data, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, runtime.ConfigName), data, 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		},
		Processes: true,
	})
}
