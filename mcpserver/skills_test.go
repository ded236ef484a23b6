package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/runner"
)

// skillsClient connects the SDK's client, with skills/list and
// skills/get registered, to a server of the example skills.
func skillsClient(t *testing.T, dirs ...string) (*Server, *mcp.ClientSession) {
	t.Helper()
	s, err := New(Options{Runtime: newFake(), Dirs: dirs, Run: runner.Options{TempDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	return s, connectClient(t, s, func(c *mcp.Client) {
		if err := mcp.AddSendingCustomMethod[*SkillsListParams, *SkillsListResult](c, "skills/list"); err != nil {
			t.Fatal(err)
		}
		if err := mcp.AddSendingCustomMethod[*SkillsGetParams, *SkillsGetResult](c, "skills/get"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSkillsExtension: the server announces io.modelcontextprotocol/skills;
// skills/list has every served skill with every file of its folder as a
// skill:// resource; each reads back (resources/read) with the listed
// size and sha256 digest; skills/get returns the same entry by URI;
// resources/list holds every file.
func TestSkillsExtension(t *testing.T) {
	examples := filepath.Join("..", "examples", "skills")
	s, cs := skillsClient(t, examples)
	ctx := context.Background()
	caps := cs.InitializeResult().Capabilities
	if _, ok := caps.Extensions[SkillsExtension]; !ok || caps.Resources == nil {
		t.Fatalf("capabilities: %+v", caps)
	}
	list, err := mcp.CallCustomMethod[*SkillsListParams, *SkillsListResult](ctx, cs, "skills/list", &SkillsListParams{})
	if err != nil {
		t.Fatal(err)
	}
	// Every skill is listed; only those with an entry point have a tool.
	dirs, _ := FindSkills(examples)
	tools := map[string]bool{}
	for _, tl := range s.Tools() {
		tools[tl.Name] = true
	}
	if len(list.Skills) != len(dirs) || len(tools) >= len(dirs) || len(tools) < 5 {
		t.Fatalf("skills/list has %d skills of %d, %d tools served", len(list.Skills), len(dirs), len(tools))
	}
	rl, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, r := range rl.Resources {
		listed[r.URI] = true
	}
	for _, e := range list.Skills {
		wantTool := ""
		if tools[e.Name] {
			wantTool = e.Name
		}
		if e.URI != "skill://"+e.Name+"/SKILL.md" || e.Tool != wantTool || e.Frontmatter["name"] != e.Name || e.Description == "" {
			t.Errorf("entry %s: %+v", e.Name, e)
		}
		// Every regular file of the folder, SKILL.md first.
		var want []string
		dir := filepath.Join(examples, e.Name)
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if d.IsDir() && d.Name() == "__pycache__" {
				return filepath.SkipDir
			}
			if d.Type().IsRegular() {
				rel, _ := filepath.Rel(dir, p)
				want = append(want, "skill://"+e.Name+"/"+filepath.ToSlash(rel))
			}
			return nil
		})
		var got []string
		for _, r := range e.Resources {
			got = append(got, r.URI)
		}
		if len(got) == 0 || got[0] != e.URI {
			t.Errorf("%s: resources do not start with SKILL.md: %v", e.Name, got)
		}
		sort.Strings(want)
		sort.Strings(got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: resources %v, files %v", e.Name, got, want)
		}
		for _, r := range e.Resources {
			if !listed[r.URI] {
				t.Errorf("%s not in resources/list", r.URI)
			}
			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: r.URI})
			if err != nil || len(rr.Contents) != 1 {
				t.Fatalf("read %s: %v", r.URI, err)
			}
			b := rr.Contents[0].Blob
			if rr.Contents[0].Text != "" {
				b = []byte(rr.Contents[0].Text)
			}
			sum := sha256.Sum256(b)
			if d := "sha256:" + hex.EncodeToString(sum[:]); d != r.Digest || int64(len(b)) != r.Size {
				t.Errorf("%s: read %d bytes %s, listed %d %s", r.URI, len(b), d, r.Size, r.Digest)
			}
			disk, _ := os.ReadFile(filepath.Join(dir, strings.TrimPrefix(r.URI, "skill://"+e.Name+"/")))
			if string(disk) != string(b) {
				t.Errorf("%s: content differs from the file on disk", r.URI)
			}
		}
		got1, err := mcp.CallCustomMethod[*SkillsGetParams, *SkillsGetResult](ctx, cs, "skills/get", &SkillsGetParams{URI: e.URI})
		if err != nil || !reflect.DeepEqual(got1.Skill, e) {
			t.Errorf("skills/get %s: %v %+v", e.URI, err, got1)
		}
	}
	if _, err := mcp.CallCustomMethod[*SkillsGetParams, *SkillsGetResult](ctx, cs, "skills/get", &SkillsGetParams{URI: "skill://nope/SKILL.md"}); err == nil {
		t.Error("skills/get of an unknown skill succeeded")
	}
}

// TestSkillsResourcesFollowDisk: a file changed on disk is refused until
// the rescan, which lists its new digest.
func TestSkillsResourcesFollowDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "calculator")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "examples", "skills", "calculator"))); err != nil {
		t.Fatal(err)
	}
	s, cs := skillsClient(t, dir)
	ctx := context.Background()
	uri := "skill://calculator/schema.json"
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "schema.json"))
	b = append(b, '\n')
	if err := os.WriteFile(filepath.Join(dir, "schema.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
		t.Error("a file changed since it was listed was served under its old digest")
	}
	s.sync()
	g, err := mcp.CallCustomMethod[*SkillsGetParams, *SkillsGetResult](ctx, cs, "skills/get", &SkillsGetParams{URI: "calculator"})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	for _, r := range g.Skill.Resources {
		if r.URI == uri && r.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
			t.Errorf("after the rescan %s is listed as %s", uri, r.Digest)
		}
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
		t.Errorf("after the rescan: %v", err)
	}
}
