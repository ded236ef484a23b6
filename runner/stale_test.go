package runner

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/fake"
)

func TestCollectStale(t *testing.T) {
	tmp := t.TempDir()
	rt := fake.New()
	ctx := context.Background()

	// A run killed mid-way: its owner file is unlocked (its process is
	// gone), its folder and its container still exist.
	dead, err := newBundleDir(tmp, "dead", "skill-dead-1")
	if err != nil {
		t.Fatal(err)
	}
	dead.owner.Close()
	bundle := t.TempDir()
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), []byte(`{"root":{"path":"r"},"process":{"cwd":"/","args":["x"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rt.Create(ctx, "skill-dead-1", runtime.CreateOpts{Bundle: bundle}); err != nil {
		t.Fatal(err)
	}
	// A run killed before it renamed its owner file into place (file
	// systems without O_TMPFILE), a minute ago; and one that may be live.
	early := filepath.Join(tmp, bundlePrefix+"early-00"+ownerSuffix+".tmp")
	fresh := filepath.Join(tmp, bundlePrefix+"fresh-00"+ownerSuffix+".tmp")
	for _, f := range []string{early, fresh} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * tmpGrace)
	if err := os.Chtimes(early, old, old); err != nil {
		t.Fatal(err)
	}
	// A live run holds its lock.
	live, err := newBundleDir(tmp, "live", "skill-live-1")
	if err != nil {
		t.Fatal(err)
	}
	defer live.release()
	// Not ours to judge: a folder without an owner file, another name.
	other := filepath.Join(tmp, "other-dir")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}

	collectStale(ctx, rt, tmp)

	for _, p := range []string{dead.dir, dead.dir + ownerSuffix, early} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("stale %s kept: %v", p, err)
		}
	}
	if _, err := rt.State(ctx, "skill-dead-1"); err == nil {
		t.Error("stale run's container not deleted")
	}
	for _, p := range []string{live.dir, live.dir + ownerSuffix, other, fresh} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
}

func TestReleaseLeavesNothing(t *testing.T) {
	tmp := t.TempDir()
	o, err := newBundleDir(tmp, "x", "skill-x-1")
	if err != nil {
		t.Fatal(err)
	}
	o.release()
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Fatalf("left %v", ents)
	}
}
