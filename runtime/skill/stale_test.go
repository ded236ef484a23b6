package skill

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/fake"
)

func TestCollectStale(t *testing.T) {
	tmp := t.TempDir()
	rt := fake.New()
	ctx := context.Background()
	mk := func(name, id string) (string, *os.File) {
		dir := filepath.Join(tmp, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		f, err := claimBundle(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		return dir, f
	}
	// A run killed mid-way: its owner file is unlocked (its process is
	// gone) and its container still exists.
	staleDir, f := mk(bundlePrefix+"dead-1", "skill-dead-1")
	f.Close()
	bundle := filepath.Join(t.TempDir())
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), []byte(`{"root":{"path":"r"},"process":{"cwd":"/","args":["x"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rt.Create(ctx, "skill-dead-1", runtime.CreateOpts{Bundle: bundle}); err != nil {
		t.Fatal(err)
	}
	// A live run: it holds its lock.
	liveDir, live := mk(bundlePrefix+"live-1", "skill-live-1")
	defer live.Close()
	// Not ours to judge: no owner file, or a name without the prefix.
	bare := filepath.Join(tmp, bundlePrefix+"bare")
	other := filepath.Join(tmp, "other-dir")
	for _, d := range []string{bare, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}

	collectStale(ctx, rt, tmp)

	if _, err := os.Stat(staleDir); !os.IsNotExist(err) {
		t.Errorf("stale bundle kept: %v", err)
	}
	if _, err := rt.State(ctx, "skill-dead-1"); err == nil {
		t.Error("stale run's container not deleted")
	}
	for _, d := range []string{liveDir, bare, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
}
