package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/skill"
	"github.com/skillrun/skillrun/spec"
)

// Config is what a server serves and with which grants.
type Config struct {
	// Dirs are skill folders, or folders searched for skills (every
	// folder below holding a SKILL.md).
	Dirs []string
	// Runtime runs the skills.
	Runtime runtime.Runtime
	// Options are the operator's grants and limits, applied to every
	// call; a call only supplies the skill's input.
	Options skill.Options
	// Version is reported to clients.
	Version string
	// Warn receives skills that could not be loaded; nil discards.
	Warn func(msg string)
}

// Server serves one MCP tool per skill. Each call runs the skill in a
// fresh sandbox (skill.Run) with the configured grants.
type Server struct {
	cfg Config
	srv *mcp.Server

	mu     sync.Mutex
	skills map[string]*spec.Skill // by tool name
	stamp  map[string]string      // by tool name: what Reload last saw on disk
}

// New loads the skills of cfg.Dirs and returns a server with a tool for
// each. A folder that is neither a skill nor holds one is an error; a skill
// that does not load is skipped with a warning.
func New(cfg Config) (*Server, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("mcp server: no runtime")
	}
	if len(cfg.Dirs) == 0 {
		return nil, errors.New("--skills: no skill folder given")
	}
	for _, d := range cfg.Dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--skills %s: not a folder", d)
		}
	}
	if cfg.Warn == nil {
		cfg.Warn = func(string) {}
	}
	s := &Server{cfg: cfg, skills: map[string]*spec.Skill{}, stamp: map[string]string{}}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "skillrun", Version: cfg.Version}, &mcp.ServerOptions{
		// Tools come and go with the skill folders (Reload).
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// MCP is the SDK server, to run over a transport
// (mcp.StdioTransport, mcp.NewStreamableHTTPHandler).
func (s *Server) MCP() *mcp.Server { return s.srv }

// Tools are the names of the tools served, sorted.
func (s *Server) Tools() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.skills))
	for n := range s.skills {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Reload rescans the folders: new skills become tools, removed ones stop
// being tools, changed ones are reloaded. The SDK tells connected clients
// (notifications/tools/list_changed).
func (s *Server) Reload() error {
	found := map[string]*spec.Skill{}
	stamps := map[string]string{}
	for _, root := range s.cfg.Dirs {
		dirs, err := spec.FindSkills(root)
		if err != nil {
			return fmt.Errorf("--skills %s: %w", root, err)
		}
		for _, dir := range dirs {
			sk, err := spec.Load(dir)
			if err != nil {
				s.cfg.Warn(fmt.Sprintf("skill %s not served: %s", dir, strings.ReplaceAll(err.Error(), "\n", "; ")))
				continue
			}
			if prev, dup := found[sk.Name]; dup {
				s.cfg.Warn(fmt.Sprintf("skill %s not served: its name %q is already served from %s", dir, sk.Name, prev.Dir))
				continue
			}
			found[sk.Name] = sk
			stamps[sk.Name] = stamp(dir)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []string
	for name := range s.skills {
		if _, ok := found[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveTools(gone...)
	}
	for name, sk := range found {
		if old, ok := s.skills[name]; ok && old.Dir == sk.Dir && s.stamp[name] == stamps[name] {
			continue
		}
		t, err := Tool(sk)
		if err != nil {
			s.cfg.Warn(fmt.Sprintf("skill %s not served: %v", sk.Dir, err))
			delete(found, name)
			continue
		}
		s.srv.AddTool(t, s.handler(name))
	}
	s.skills, s.stamp = found, stamps
	return nil
}

// stamp is a cheap fingerprint of a skill folder's top-level files (name,
// size, modification time): enough to notice an edited manifest or
// schema.
func stamp(dir string) string {
	var b strings.Builder
	for _, sub := range []string{".", "scripts"} {
		ents, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			continue
		}
		for _, e := range ents {
			if fi, err := e.Info(); err == nil {
				fmt.Fprintf(&b, "%s/%s:%d:%d;", sub, e.Name(), fi.Size(), fi.ModTime().UnixNano())
			}
		}
	}
	return b.String()
}

// Tool is the MCP tool definition of a skill: its name and description,
// its input schema (an object), and hints from the manifest: read-only
// unless it may write a workspace, open-world when it declares network
// hosts. `skillrun skill inspect --format mcp` prints the same.
func Tool(sk *spec.Skill) (*mcp.Tool, error) {
	schema, err := sk.ToolSchema()
	if err != nil {
		return nil, err
	}
	if schema["type"] != "object" {
		return nil, fmt.Errorf("input schema of %q: type %v, an MCP tool's input must be an object", sk.Name, schema["type"])
	}
	ws := sk.Manifest.Filesystem.Workspace
	openWorld := len(sk.Manifest.Network.Hosts) > 0
	t := &mcp.Tool{
		Name:        sk.Name,
		Description: sk.Description,
		InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint:  ws == "" || ws == spec.WorkspaceNone,
			OpenWorldHint: &openWorld,
		},
	}
	if title := sk.Metadata["title"]; title != "" {
		t.Title = title
	}
	return t, nil
}

// handler runs the skill name with the call's arguments as its input. The
// result envelope (skill run's JSON) is the structured content and, as
// JSON text, the content; a skill that did not succeed (failure, timeout,
// limit, policy refusal) is a tool error, as is input the schema refuses.
func (s *Server) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.mu.Lock()
		sk := s.skills[name]
		s.mu.Unlock()
		if sk == nil {
			return toolError(fmt.Sprintf("skill %q is no longer served", name)), nil
		}
		input := []byte(req.Params.Arguments)
		if len(input) == 0 || string(input) == "null" {
			input = []byte("{}")
		}
		res, err := skill.Run(ctx, s.cfg.Runtime, sk, input, s.cfg.Options)
		if err != nil {
			if skill.IsInputError(err) {
				return toolError(fmt.Sprintf("invalid input for %s: %v", name, err)), nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return toolError(fmt.Sprintf("skill %s could not run: %v", name, err)), nil
		}
		text, err := json.Marshal(res)
		if err != nil {
			return nil, err
		}
		out := &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: string(text)}},
			StructuredContent: json.RawMessage(text),
			IsError:           !res.OK,
		}
		return out, nil
	}
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}, IsError: true}
}
