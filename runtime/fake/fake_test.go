package fake_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/fake"
	"github.com/skillrun/skillrun/runtime/runtimetest"
)

func TestConformance(t *testing.T) {
	runtimetest.Run(t, runtimetest.Harness{
		New:    func(*testing.T) runtime.Runtime { return fake.New() },
		Bundle: bundle,
	})
}

func bundle(t *testing.T, args ...string) string {
	dir := t.TempDir()
	s := specs.Spec{Version: specs.Version, Root: &specs.Root{Path: "rootfs"}, Process: &specs.Process{Cwd: "/", Args: args}}
	data, _ := json.Marshal(s)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
