package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/skill"
	"github.com/skillrun/skillrun/spec"
)

// Options configure a Server.
type Options struct {
	// Runtime runs the sandboxes.
	Runtime runtime.Runtime
	// Dirs are skill folders, or folders searched for skills (every
	// folder holding a SKILL.md below them).
	Dirs []string
	// Run holds the operator's grants and limits (workspace, network,
	// env, ...). Every call runs with exactly these: a call only brings
	// its input and cannot widen them.
	Run skill.Options
	// Name and Version identify the server to clients.
	Name, Version string
}

// Server serves skills as MCP tools.
type Server struct {
	opts     Options
	mcp      *mcp.Server
	skills   []*spec.Skill
	tools    []*mcp.Tool
	warnings []string
}

// New loads the skills under opts.Dirs and builds the MCP server. A
// folder that does not exist is an error; an invalid skill found while
// searching is skipped with a warning, as is a second skill of the same
// name.
func New(opts Options) (*Server, error) {
	if opts.Runtime == nil {
		return nil, errors.New("mcpserver: no runtime")
	}
	if len(opts.Dirs) == 0 {
		return nil, errors.New("mcpserver: no skill folder given")
	}
	if opts.Name == "" {
		opts.Name = "skillrun"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{opts: opts}
	seen := map[string]string{}
	for _, d := range opts.Dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("skills folder %q: not a folder", d)
		}
		found, err := FindSkills(d)
		if err != nil {
			return nil, fmt.Errorf("skills folder %q: %w", d, err)
		}
		if len(found) == 0 {
			s.warnings = append(s.warnings, fmt.Sprintf("skills folder %q: no skill (folder with %s) found", d, spec.SkillFile))
		}
		for _, dir := range found {
			sk, err := spec.Load(dir)
			if err != nil {
				s.warnings = append(s.warnings, fmt.Sprintf("skill %q skipped: %s", dir, strings.ReplaceAll(err.Error(), "\n", "; ")))
				continue
			}
			if prev, dup := seen[sk.Name]; dup {
				s.warnings = append(s.warnings, fmt.Sprintf("skill %q skipped: name %q already served from %q", dir, sk.Name, prev))
				continue
			}
			t, err := Tool(sk)
			if err != nil {
				s.warnings = append(s.warnings, fmt.Sprintf("skill %q skipped: %v", dir, err))
				continue
			}
			seen[sk.Name] = dir
			s.skills = append(s.skills, sk)
			s.tools = append(s.tools, t)
		}
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: opts.Version}, nil)
	for i, t := range s.tools {
		s.mcp.AddTool(t, s.handler(s.skills[i]))
	}
	return s, nil
}

// MCP returns the SDK server, to be run on a transport.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Tools returns the tool definitions served, in order.
func (s *Server) Tools() []*mcp.Tool { return s.tools }

// Warnings returns what New skipped and why.
func (s *Server) Warnings() []string { return s.warnings }

// handler runs sk once per call in a fresh sandbox.
func (s *Server) handler(sk *spec.Skill) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var input []byte
		if req.Params != nil {
			input = req.Params.Arguments
		}
		if len(input) == 0 || string(input) == "null" {
			input = []byte("{}")
		}
		res, err := skill.Run(ctx, s.opts.Runtime, sk, input, s.opts.Run)
		if err != nil {
			if skill.IsInputError(err) {
				return toolError(fmt.Sprintf("invalid input for skill %q: %v", sk.Name, err)), nil
			}
			return toolError(fmt.Sprintf("skillrun could not run skill %q: %v", sk.Name, err)), nil
		}
		return resultOf(res), nil
	}
}

// resultOf turns a skill result into a tool result: the envelope as
// structured content and as JSON text (for clients that read only text),
// with a one-line explanation first when the skill failed or was stopped.
func resultOf(res *skill.Result) *mcp.CallToolResult {
	b, err := json.Marshal(res)
	if err != nil {
		return toolError(fmt.Sprintf("encode result of skill %q: %v", res.Skill, err))
	}
	out := &mcp.CallToolResult{StructuredContent: json.RawMessage(b), IsError: !res.OK}
	if !res.OK {
		out.Content = append(out.Content, &mcp.TextContent{Text: failure(res)})
	}
	out.Content = append(out.Content, &mcp.TextContent{Text: string(b)})
	return out
}

// failure says in one line why a run did not succeed.
func failure(res *skill.Result) string {
	switch res.StoppedReason {
	case skill.StoppedPolicy:
		return fmt.Sprintf("policy refusal: skill %q needs a grant the server operator did not give: %s", res.Skill, res.Error)
	case skill.StoppedTimeout:
		return fmt.Sprintf("timeout: skill %q %s", res.Skill, res.Error)
	case "":
		return fmt.Sprintf("skill %q failed: exit code %d", res.Skill, res.ExitCode)
	}
	return fmt.Sprintf("skill %q stopped (%s): %s", res.Skill, res.StoppedReason, res.Error)
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
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
