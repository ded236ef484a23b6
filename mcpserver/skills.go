package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/spec"
)

// SkillsExtension is the identifier of the "Skills over MCP" extension
// the server implements: skills/list, skills/get, and every skill file
// as a skill://NAME/PATH resource with its sha256 digest.
const SkillsExtension = "io.modelcontextprotocol/skills"

// Limits of what a skill serves as resources: files larger, or beyond
// the count, are left out (the skill is still served as a tool).
const (
	maxResourceFile  = 8 << 20
	maxResourceFiles = 2000
)

// SkillEntry describes one skill in skills/list and skills/get.
type SkillEntry struct {
	// URI is the skill's SKILL.md resource, skill://NAME/SKILL.md.
	URI string `json:"uri"`
	// Name and Description are the front matter's.
	Name        string `json:"name"`
	Description string `json:"description"`
	// Frontmatter is SKILL.md's front matter (name, description,
	// license, compatibility, metadata, allowed-tools).
	Frontmatter map[string]any `json:"frontmatter"`
	// Tool is the name of the tool that runs the skill; absent for a
	// skill without an entry point (used through its scripts, not called).
	Tool string `json:"tool,omitempty"`
	// Resources are every file of the skill.
	Resources []SkillResource `json:"resources"`
}

// SkillResource is one file of a skill.
type SkillResource struct {
	// URI is skill://NAME/PATH (PATH relative to the skill folder, each
	// segment escaped).
	URI      string `json:"uri"`
	MIMEType string `json:"mimeType,omitempty"`
	Size     int64  `json:"size"`
	// Digest is "sha256:" and the hex SHA-256 of the file's bytes.
	Digest string `json:"digest"`
}

// skillFile is a served file: its resource and where it lives.
type skillFile struct {
	res  SkillResource
	path string
}

// skillURI returns skill://name/rel.
func skillURI(name, rel string) string {
	segs := strings.Split(filepath.ToSlash(rel), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "skill://" + url.PathEscape(name) + "/" + strings.Join(segs, "/")
}

// skillFiles lists sk's regular files (not .git, __pycache__ or
// node_modules; no symlinks), with digests, SKILL.md first.
func skillFiles(sk *spec.Skill) ([]skillFile, error) {
	var out []skillFile
	err := filepath.WalkDir(sk.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != sk.Dir && (d.Name() == ".git" || d.Name() == "__pycache__" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if len(out) >= maxResourceFiles {
			return fs.SkipAll
		}
		fi, err := d.Info()
		if err != nil || fi.Size() > maxResourceFile {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(sk.Dir, p)
		sum := sha256.Sum256(b)
		out = append(out, skillFile{path: p, res: SkillResource{
			URI: skillURI(sk.Name, rel), MIMEType: mimeOf(rel, b), Size: int64(len(b)),
			Digest: "sha256:" + hex.EncodeToString(sum[:]),
		}})
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool {
		mi := strings.HasSuffix(out[i].res.URI, "/"+spec.SkillFile) && strings.Count(out[i].res.URI, "/") == 3
		mj := strings.HasSuffix(out[j].res.URI, "/"+spec.SkillFile) && strings.Count(out[j].res.URI, "/") == 3
		if mi != mj {
			return mi
		}
		return out[i].res.URI < out[j].res.URI
	})
	return out, err
}

// mimeOf guesses a file's media type: Markdown, by extension, else text
// or octets.
func mimeOf(rel string, b []byte) string {
	switch ext := strings.ToLower(path.Ext(rel)); ext {
	case ".md":
		return "text/markdown"
	case ".py":
		return "text/x-python"
	case ".yaml", ".yml":
		return "application/yaml"
	case ".json":
		return "application/json"
	case "":
	default:
		if t := mime.TypeByExtension(ext); t != "" {
			return t
		}
	}
	if utf8.Valid(b) && !bytes.ContainsRune(b, 0) {
		return "text/plain"
	}
	return "application/octet-stream"
}

// skillEntry is sk's skills/list entry.
func skillEntry(sk *spec.Skill, files []skillFile) SkillEntry {
	fm := map[string]any{"name": sk.Name, "description": sk.Description}
	if sk.License != "" {
		fm["license"] = sk.License
	}
	if sk.Compatibility != "" {
		fm["compatibility"] = sk.Compatibility
	}
	if len(sk.Metadata) > 0 {
		fm["metadata"] = sk.Metadata
	}
	if len(sk.AllowedTools) > 0 {
		fm["allowed-tools"] = strings.Join(sk.AllowedTools, " ")
	}
	e := SkillEntry{URI: skillURI(sk.Name, spec.SkillFile), Name: sk.Name, Description: sk.Description,
		Frontmatter: fm, Resources: []SkillResource{}}
	if sk.HasEntry() {
		e.Tool = sk.Name // a skill without an entry point has no tool of its own
	}
	for _, f := range files {
		e.Resources = append(e.Resources, f.res)
	}
	return e
}

// resourceHandler serves f, read at request time: a file changed since
// the last rescan is refused (its digest would not match the listed one;
// the next rescan lists the new one).
func resourceHandler(f skillFile) mcp.ResourceHandler {
	return func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
		sum := sha256.Sum256(b)
		if "sha256:"+hex.EncodeToString(sum[:]) != f.res.Digest {
			return nil, fmt.Errorf("%s changed on disk since it was listed (the next rescan lists it again)", f.res.URI)
		}
		c := &mcp.ResourceContents{URI: f.res.URI, MIMEType: f.res.MIMEType}
		if strings.HasPrefix(f.res.MIMEType, "text/") || f.res.MIMEType == "application/json" || f.res.MIMEType == "application/yaml" {
			c.Text = string(b)
		} else {
			c.Blob = b
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}, nil
	}
}

// SkillsListParams are skills/list's parameters.
type SkillsListParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// SkillsListResult is skills/list's result (every skill, no pages).
type SkillsListResult struct {
	mcp.ResultBase
	Skills []SkillEntry `json:"skills"`
}

// SkillsGetParams are skills/get's parameters: the skill's URI (its
// SKILL.md resource) or its name.
type SkillsGetParams struct {
	mcp.ParamsBase
	URI string `json:"uri"`
}

// SkillsGetResult is skills/get's result.
type SkillsGetResult struct {
	mcp.ResultBase
	Skill SkillEntry `json:"skill"`
}

// addSkillsMethods registers skills/list and skills/get.
func (s *Server) addSkillsMethods() error {
	if err := mcp.AddReceivingCustomMethod(s.mcp, "skills/list", func(context.Context, *mcp.ServerSession, *SkillsListParams) (*SkillsListResult, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		out := &SkillsListResult{Skills: []SkillEntry{}}
		for _, n := range s.order {
			out.Skills = append(out.Skills, s.served[n].entry)
		}
		return out, nil
	}); err != nil {
		return err
	}
	return mcp.AddReceivingCustomMethod(s.mcp, "skills/get", func(_ context.Context, _ *mcp.ServerSession, p *SkillsGetParams) (*SkillsGetResult, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, n := range s.order {
			if e := s.served[n].entry; p != nil && (e.URI == p.URI || e.Name == p.URI) {
				return &SkillsGetResult{Skill: e}, nil
			}
		}
		uri := ""
		if p != nil {
			uri = p.URI
		}
		return nil, fmt.Errorf("skills/get: no skill %q", uri)
	})
}

// FindSkills returns every folder below root (root included) that holds a
// SKILL.md, sorted, not descending into a skill, .git, node_modules or
// __pycache__.
func FindSkills(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return nil // unreadable corners are skipped
		}
		if !d.IsDir() {
			return nil
		}
		if p != root && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "__pycache__") {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(p, spec.SkillFile)); err == nil {
			out = append(out, p)
			return filepath.SkipDir
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}
