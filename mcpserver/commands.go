package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/internal/safefs"
	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/spec"
)

// Tool names the command tools reserve: a skill folder of one of these
// names is skipped with a warning.
const (
	RunCommandTool = "run_command"
	WriteFileTool  = "write_file"
	ReadFileTool   = "read_file"
)

var reservedTools = map[string]bool{RunCommandTool: true, WriteFileTool: true, ReadFileTool: true}

// textLimit bounds the text block of a command's result (the output a
// model reads); the whole output stays in structuredContent.
const textLimit = 8 << 10

func runCommandTool() *mcp.Tool {
	return &mcp.Tool{
		Name: RunCommandTool,
		Description: "Run a command in a sandbox: one of a skill's scripts with arguments, or code you wrote, on the files " +
			"of your workspace (/workspace, the working directory). Read the skill's instructions first (resource " +
			"skill://NAME/SKILL.md): they say which scripts to run and how. With \"skill\", the command runs in that " +
			"skill's sandbox (the skill read-only at /skill, its packages installed, a relative script found in /skill); " +
			"without, in a plain sandbox. No network unless the server's operator granted it; limits apply. " +
			"Move files in and out with write_file and read_file.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"skill": map[string]any{"type": "string", "description": "the skill whose sandbox runs the command (optional)"},
				"command": map[string]any{
					"description": "the command: an array of arguments, or a string run with sh -c",
					"anyOf": []any{
						map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": 1},
						map[string]any{"type": "string", "minLength": 1},
					},
				},
				"stdin":     map[string]any{"type": "string", "description": "standard input (optional)"},
				"timeout_s": map[string]any{"type": "number", "exclusiveMinimum": 0, "description": "wall-clock limit in seconds, at most the operator's"},
				"cwd":       map[string]any{"type": "string", "description": "working directory inside /workspace or /skill (optional)"},
			},
			"required":             []any{"command"},
			"additionalProperties": false,
		},
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: new(false)},
	}
}

func writeFileTool() *mcp.Tool {
	return &mcp.Tool{
		Name:        WriteFileTool,
		Description: "Write a file into your workspace (/workspace of your commands). Paths are relative to the workspace.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"path":     map[string]any{"type": "string", "minLength": 1},
				"content":  map[string]any{"type": "string"},
				"encoding": map[string]any{"type": "string", "enum": []any{"text", "base64"}, "default": "text"},
				"mode":     map[string]any{"type": "integer", "minimum": 0, "maximum": 511, "description": "permission bits (default 0644; 0755 for a script)"},
			},
			"required":             []any{"path", "content"},
			"additionalProperties": false,
		},
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: new(false)},
	}
}

func readFileTool() *mcp.Tool {
	return &mcp.Tool{
		Name:        ReadFileTool,
		Description: "Read a file of your workspace (text, or base64 when it is not UTF-8). Paths are relative to the workspace.",
		InputSchema: map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"path": map[string]any{"type": "string", "minLength": 1}},
			"required":             []any{"path"},
			"additionalProperties": false,
		},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
	}
}

// addCommandTools serves run_command, write_file, read_file and the
// workspace resources.
func (s *Server) addCommandTools() {
	s.mcp.AddTool(runCommandTool(), s.runCommand)
	s.mcp.AddTool(writeFileTool(), s.observed(WriteFileTool, s.writeFile))
	s.mcp.AddTool(readFileTool(), s.observed(ReadFileTool, s.readFile))
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{Name: "workspace", URITemplate: "workspace://{+path}",
		Description: "a file of this session's workspace"}, s.readWorkspaceResource)
	s.mcp.AddReceivingMiddleware(s.listWorkspaceResources)
}

// observed wraps a file tool's handler: Options.Observe learns of each
// call once; a tool error (a path, size or quota refused) is bad input.
func (s *Server) observed(tool string, h mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		call := Call{Tool: tool}
		defer s.observe(req, &call, time.Now())()
		r, err := h(ctx, req)
		if r != nil && r.IsError {
			call.Err = &runner.InputError{Err: errors.New(textOf(r))}
		}
		return r, err
	}
}

// commandIn is run_command's input.
type commandIn struct {
	Skill    string          `json:"skill"`
	Command  json.RawMessage `json:"command"`
	Stdin    *string         `json:"stdin"`
	TimeoutS *float64        `json:"timeout_s"`
	Cwd      string          `json:"cwd"`
}

// CommandResult is run_command's structured result: the run's envelope
// and the workspace files the call created or changed.
type CommandResult struct {
	*runner.Result
	Files []wsFile `json:"files"`
}

// begin registers a call (refused after Close) and returns its context,
// ended by Close too (the SDK does not end a call's context when the
// server stops serving) and by the end of the HTTP request that brought
// it, and the function that ends the call.
func (s *Server) begin(ctx context.Context, req mcp.Request) (context.Context, func(), error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, errShutdown
	}
	s.calls.Add(1)
	s.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.stop, func() { cancel(errShutdown) })
	gone := func() bool { return true }
	if rc := s.requestContext(req); rc != nil {
		gone = context.AfterFunc(rc, func() { cancel(errClientGone) })
	}
	return ctx, func() { stop(); gone(); cancel(nil); s.calls.Done() }, nil
}

func decodeArgs(req *mcp.CallToolRequest, v any) error {
	var raw []byte
	if req.Params != nil {
		raw = req.Params.Arguments
	}
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("arguments: %v", err)
	}
	return nil
}

// runCommand runs a command in a skill's sandbox (skill exec), or in one
// without a skill (sandbox), with exactly the operator's grants and the
// session's workspace.
func (s *Server) runCommand(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	call := Call{Tool: RunCommandTool, Skill: spec.BareName}
	defer s.observe(req, &call, time.Now())()
	fail := func(err error) (*mcp.CallToolResult, error) {
		call.Err = err
		return toolError(err.Error()), nil
	}
	ctx, end, err := s.begin(ctx, req)
	if err != nil {
		return fail(err)
	}
	defer end()
	var in commandIn
	if err := decodeArgs(req, &in); err != nil {
		return fail(&runner.InputError{Err: err})
	}
	argv, err := commandArgv(in.Command)
	if err != nil {
		return fail(&runner.InputError{Err: err})
	}
	call.Command = argv[0]
	sk := spec.Bare()
	if in.Skill != "" {
		s.mu.Lock()
		n, ok := s.served[in.Skill]
		s.mu.Unlock()
		if !ok {
			return fail(&runner.InputError{Err: fmt.Errorf("skill: %q is not served here (skills/list lists them)", in.Skill)})
		}
		sk = n.skill
	} else if len(s.opts.With) > 0 {
		if err := sk.WithPackages(s.opts.With); err != nil {
			return fail(err)
		}
	}
	call.Skill = sk.Name
	if in.Stdin != nil && int64(len(*in.Stdin)) > s.fileLimit() {
		return fail(&runner.InputError{Err: fmt.Errorf("stdin: %d bytes, at most %d", len(*in.Stdin), s.fileLimit())})
	}
	opts := s.opts.Run
	if in.TimeoutS != nil {
		limit := opts.Timeout
		if limit == 0 {
			limit = time.Duration(sk.Manifest.Limits.Timeout)
		}
		if limit == 0 {
			limit = spec.DefaultTimeout
		}
		d := time.Duration(*in.TimeoutS * float64(time.Second))
		if *in.TimeoutS <= 0 || d > limit {
			return fail(&runner.InputError{Err: fmt.Errorf("timeout_s: %g is not in (0, %g], the operator's limit", *in.TimeoutS, limit.Seconds())})
		}
		opts.Timeout = d
	}
	se, err := s.sessionOf(req.Session)
	if err != nil {
		return fail(err)
	}
	opts.Workspace = se.dir
	if err := s.checkQuota(se, 0); err != nil {
		return fail(&runner.InputError{Err: err})
	}
	var stdin []byte
	if in.Stdin != nil {
		stdin = []byte(*in.Stdin)
	}
	before, _, _ := scan(se.dir)
	var res *runner.Result
	// A warm sandbox of the session's (a call that narrows the timeout
	// runs cold: the warm ones have the operator's).
	if in.TimeoutS == nil {
		when := runner.EntryCommand
		if runner.PythonWarmable(argv) {
			when = runner.EntryPython
		}
		p := s.commandPool(se, sk, opts, when)
		p.begin()
		defer p.end()
		if m := p.takeIfAny(); m != nil {
			call.Warm = true
			if when == runner.EntryPython {
				res, err = m.sb.CallPython(ctx, spec.Exec{Args: argv, Cwd: in.Cwd}, stdin)
			} else {
				res, err = m.sb.CallCommand(ctx, spec.Exec{Args: argv, Cwd: in.Cwd}, stdin)
			}
			p.release(m)
			if (errors.Is(err, runner.ErrSandboxEnded) || errors.Is(err, runner.ErrNotWarm)) && ctx.Err() == nil {
				res, err, call.Warm = nil, nil, false // nothing ran: run cold
			}
		}
	}
	if res == nil && err == nil {
		opts.Exec = &runner.Exec{Exec: spec.Exec{Args: argv, Cwd: in.Cwd}, Stdin: bytes.NewReader(stdin)}
		res, err = s.runCold(ctx, sk, nil, opts)
	}
	call.Result, call.Err = res, err
	if err != nil {
		if runner.IsInputError(err) {
			return toolError(fmt.Sprintf("invalid command: %v", err)), nil
		}
		return toolError(fmt.Sprintf("skillrun could not run the command: %v", err)), nil
	}
	after, _, _ := scan(se.dir)
	return commandResult(&CommandResult{Result: res, Files: changed(before, after)}), nil
}

// commandArgv reads run_command's command: an array of strings, or a
// string run with sh -c.
func commandArgv(raw json.RawMessage) ([]string, error) {
	var argv []string
	var line string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, errors.New("command: missing: give an array of arguments or a string")
	case json.Unmarshal(raw, &argv) == nil:
		if len(argv) == 0 || argv[0] == "" {
			return nil, errors.New("command: empty")
		}
		return argv, nil
	case json.Unmarshal(raw, &line) == nil:
		if strings.TrimSpace(line) == "" {
			return nil, errors.New("command: empty")
		}
		if words, ok := plainWords(line); ok {
			// No shell syntax: the same command as an array (a script
			// path in it is then found in the skill as for skill exec).
			return words, nil
		}
		return []string{"sh", "-c", line}, nil
	}
	return nil, errors.New("command: must be an array of strings or a string")
}

// plainWords splits a command line that uses no shell syntax but
// blanks and quotes ('...' and "..." without $, ` or \ inside) into its
// words, as sh would; ok is false for anything else (sh -c runs it).
func plainWords(line string) (words []string, ok bool) {
	var w strings.Builder
	in := false // inside a word
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
		case c == '\'' || c == '"':
			j := strings.IndexByte(line[i+1:], c)
			if j < 0 {
				return nil, false
			}
			q := line[i+1 : i+1+j]
			if c == '"' && strings.ContainsAny(q, "$`\\") {
				return nil, false
			}
			w.WriteString(q)
			in, i = true, i+1+j
		case strings.IndexByte("$`\\|&;<>(){}*?[]~!#\n\r", c) >= 0:
			return nil, false
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words, len(words) > 0
}

// commandResult is the tool result of a command: for the model, the
// output (cut) and a one-line status; the envelope in structuredContent.
func commandResult(r *CommandResult) *mcp.CallToolResult {
	b, err := json.Marshal(r)
	if err != nil {
		return toolError(fmt.Sprintf("encode result: %v", err))
	}
	var text strings.Builder
	text.WriteString(briefOutput(r.Result))
	status := fmt.Sprintf("[exit %d, %d ms", r.ExitCode, r.Usage.WallMS)
	if r.StoppedReason != "" {
		status += ", stopped: " + r.StoppedReason
	}
	if r.Error != "" {
		status += "; " + r.Error
	}
	if len(r.Files) > 0 {
		names := make([]string, 0, len(r.Files))
		for i, f := range r.Files {
			if i == 10 {
				names = append(names, fmt.Sprintf("%d more", len(r.Files)-i))
				break
			}
			names = append(names, fmt.Sprintf("%s (%d B)", f.Path, f.Size))
		}
		status += "; files: " + strings.Join(names, ", ")
	}
	text.WriteString(status + "]")
	return &mcp.CallToolResult{IsError: !r.OK, StructuredContent: json.RawMessage(b),
		Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}}
}

type writeIn struct {
	Path     string  `json:"path"`
	Content  string  `json:"content"`
	Encoding string  `json:"encoding"`
	Mode     *uint32 `json:"mode"`
}

// writeFile writes a file into the session's workspace, confined to it.
func (s *Server) writeFile(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	_, end, err := s.begin(ctx, req)
	if err != nil {
		return toolError(err.Error()), nil
	}
	defer end()
	var in writeIn
	if err := decodeArgs(req, &in); err != nil {
		return toolError(err.Error()), nil
	}
	data := []byte(in.Content)
	switch in.Encoding {
	case "", "text":
	case "base64":
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return toolError(fmt.Sprintf("content: not base64: %v", err)), nil
		}
	default:
		return toolError(fmt.Sprintf("encoding: %q is not text or base64", in.Encoding)), nil
	}
	if int64(len(data)) > s.fileLimit() {
		return toolError(fmt.Sprintf("content: %d bytes, at most %d", len(data), s.fileLimit())), nil
	}
	mode := fs.FileMode(0o644)
	if in.Mode != nil {
		if *in.Mode > 0o777 {
			return toolError(fmt.Sprintf("mode: %o is not permission bits (0-0777)", *in.Mode)), nil
		}
		mode = fs.FileMode(*in.Mode)
	}
	se, err := s.sessionOf(req.Session)
	if err != nil {
		return toolError(err.Error()), nil
	}
	if se.dir == "" {
		return toolError("path: this server has no workspace (--workspace-root or --workspace)"), nil
	}
	if err := s.checkQuota(se, int64(len(data))); err != nil {
		return toolError(err.Error()), nil
	}
	owner := se.owner
	if owner[0] < 0 {
		owner = ownerOf(se.dir)
	}
	if err := safefs.WriteBeneath(se.dir, in.Path, data, mode, owner); err != nil {
		return toolError(fmt.Sprintf("path: %v", strings.ReplaceAll(err.Error(), se.dir, "/workspace"))), nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("wrote %s (%d bytes)", in.Path, len(data))}}}, nil
}

// readFile reads a file of the session's workspace, confined to it.
func (s *Server) readFile(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	_, end, err := s.begin(ctx, req)
	if err != nil {
		return toolError(err.Error()), nil
	}
	defer end()
	var in struct {
		Path string `json:"path"`
	}
	if err := decodeArgs(req, &in); err != nil {
		return toolError(err.Error()), nil
	}
	se, err := s.sessionOf(req.Session)
	if err != nil {
		return toolError(err.Error()), nil
	}
	data, err := s.readBeneath(se, in.Path)
	if err != nil {
		return toolError(err.Error()), nil
	}
	if utf8.Valid(data) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(data)}},
			StructuredContent: map[string]any{"path": in.Path, "size": len(data), "encoding": "text"}}, nil
	}
	enc := base64.StdEncoding.EncodeToString(data)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: enc}},
		StructuredContent: map[string]any{"path": in.Path, "size": len(data), "encoding": "base64"}}, nil
}

// readBeneath reads rel of the session's workspace: local paths only,
// no symlink followed, a regular file within the file limit.
func (s *Server) readBeneath(se *session, rel string) ([]byte, error) {
	if se.dir == "" {
		return nil, errors.New("path: this server has no workspace (--workspace-root or --workspace)")
	}
	if !fs.ValidPath(rel) || rel == "." {
		return nil, fmt.Errorf("path: %q is not a path inside the workspace (relative, no \"..\")", rel)
	}
	f, err := safefs.OpenBeneath(se.dir, rel)
	if err != nil {
		return nil, fmt.Errorf("path: %q: %v", rel, errors.Unwrap(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("path: %q is not a regular file", rel)
	}
	if fi.Size() > s.fileLimit() {
		return nil, fmt.Errorf("path: %q is %d bytes, more than the %d a read returns", rel, fi.Size(), s.fileLimit())
	}
	return io.ReadAll(io.LimitReader(f, s.fileLimit()+1))
}

// readWorkspaceResource serves workspace://PATH of the session.
func (s *Server) readWorkspaceResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	rel, ok := strings.CutPrefix(uri, "workspace://")
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	se, err := s.sessionOf(req.Session)
	if err != nil {
		return nil, err
	}
	data, err := s.readBeneath(se, rel)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	c := &mcp.ResourceContents{URI: uri}
	if utf8.Valid(data) {
		c.Text, c.MIMEType = string(data), "text/plain"
	} else {
		c.Blob, c.MIMEType = data, "application/octet-stream"
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}, nil
}

// listWorkspaceResources adds the session's workspace files to the last
// page of resources/list (each session sees its own).
func (s *Server) listWorkspaceResources(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "resources/list" || err != nil {
			return res, err
		}
		lr, ok := res.(*mcp.ListResourcesResult)
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if !ok || lr.NextCursor != "" {
			return res, err
		}
		s.mu.Lock()
		se := s.sessions[ss]
		s.mu.Unlock()
		if se == nil || se.dir == "" {
			return res, err
		}
		files, _, _ := scan(se.dir)
		for _, f := range changed(nil, files) {
			lr.Resources = append(lr.Resources, &mcp.Resource{URI: "workspace://" + f.Path, Name: f.Path, Size: f.Size})
		}
		return res, err
	}
}
