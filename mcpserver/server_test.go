package mcpserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/runtime/fake"
	"github.com/skillrun/skillrun/spec"
)

func examples(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs("../examples/skills")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestTool(t *testing.T) {
	for name, want := range map[string]struct{ readOnly, openWorld bool }{
		"calculator": {true, false},
		"fetch-url":  {true, true},
		"save-note":  {false, false},
	} {
		sk, err := spec.Load(filepath.Join(examples(t), name))
		if err != nil {
			t.Fatal(err)
		}
		tl, err := Tool(sk)
		if err != nil {
			t.Fatal(err)
		}
		schema := tl.InputSchema.(map[string]any)
		if tl.Name != name || tl.Description == "" || schema["type"] != "object" || schema["$schema"] != nil {
			t.Errorf("%s: tool %+v", name, tl)
		}
		if tl.Annotations.ReadOnlyHint != want.readOnly || *tl.Annotations.OpenWorldHint != want.openWorld {
			t.Errorf("%s: annotations %+v, want %+v", name, tl.Annotations, want)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	if _, err := New(Config{Runtime: fake.New(), Dirs: []string{"/nonexistent"}}); err == nil || !strings.Contains(err.Error(), "--skills /nonexistent") {
		t.Errorf("missing folder: %v", err)
	}
	if _, err := New(Config{Runtime: fake.New()}); err == nil || !strings.Contains(err.Error(), "--skills") {
		t.Errorf("no folder: %v", err)
	}
}

// TestReloadListChanged: a skill copied into a served folder becomes a
// tool, its removal removes it, and a connected client sees both.
func TestReloadListChanged(t *testing.T) {
	dir := t.TempDir()
	copySkill(t, filepath.Join(examples(t), "calculator"), filepath.Join(dir, "calculator"))
	var warnings []string
	s, err := New(Config{Runtime: fake.New(), Dirs: []string{dir}, Warn: func(m string) { warnings = append(warnings, m) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := s.MCP().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	changed := make(chan struct{}, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "t"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	names := func() string {
		r, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, tl := range r.Tools {
			n = append(n, tl.Name)
		}
		return strings.Join(n, ",")
	}
	if got := names(); got != "calculator" {
		t.Fatalf("tools %q", got)
	}
	copySkill(t, filepath.Join(examples(t), "text-stats"), filepath.Join(dir, "text-stats"))
	os.MkdirAll(filepath.Join(dir, "broken"), 0o755)
	os.WriteFile(filepath.Join(dir, "broken", "SKILL.md"), []byte("no front matter"), 0o644)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	waitChanged(t, changed)
	if got := names(); got != "calculator,text-stats" {
		t.Errorf("after adding text-stats: %q", got)
	}
	if len(warnings) == 0 || !strings.Contains(warnings[0], "broken") {
		t.Errorf("the broken skill was not reported: %q", warnings)
	}
	os.RemoveAll(filepath.Join(dir, "calculator"))
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	waitChanged(t, changed)
	if got := names(); got != "text-stats" {
		t.Errorf("after removing calculator: %q", got)
	}
}

func copySkill(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, fi.Mode())
	})
	if err != nil {
		t.Fatal(err)
	}
}

func waitChanged(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed")
	}
}
