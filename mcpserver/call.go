package mcpserver

// One tool call: the handler (a warm sandbox or a cold run) and the
// result a model reads.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/spec"
)

// handler runs sk once per call in a fresh sandbox: a warm one from p
// when one is ready, else a cold one.
func (s *Server) handler(sk *spec.Skill, p *pool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		call := Call{Tool: sk.Name, Skill: sk.Name}
		defer s.observe(req, &call, time.Now())()
		ctx, end, err := s.begin(ctx, req)
		if err != nil {
			call.Err = err
			return toolError(err.Error()), nil
		}
		defer end()
		var raw []byte
		if req.Params != nil && string(req.Params.Arguments) != "null" {
			raw = req.Params.Arguments // absent or null: {}
		}
		// Checked once, here: no sandbox is spent on bad input, and the
		// warm and the cold path take the checked input as it is.
		in, err := runner.NewInput(sk, raw)
		var res *runner.Result
		opts := s.opts.Run
		if err == nil && s.opts.WorkspaceRoot != "" && wantsWorkspace(sk) {
			// The session's own workspace: bound at launch, so no warm
			// sandbox (they are the skill's, not the session's).
			var se *session
			if se, err = s.sessionOf(req.Session); err == nil {
				opts.Workspace = se.dir
				p = nil
			}
		}
		if err == nil {
			// The pool launches nothing while this call runs (end, after
			// the answer, wakes it).
			p.begin()
			defer p.end()
			if m := p.takeIfAny(); m != nil {
				call.Warm = true
				res, err = m.sb.Call(ctx, in)
				// Destroyed in the background: the answer does not wait
				// for the container's deletion (Close waits for it).
				p.release(m)
				if errors.Is(err, runner.ErrSandboxEnded) && ctx.Err() == nil {
					res, err, call.Warm = nil, nil, false // it died waiting: nothing ran, run cold
				}
			}
		}
		if res == nil && err == nil {
			res, err = s.runCold(ctx, sk, in, opts)
		}
		call.Result, call.Err = res, err
		if err != nil {
			if runner.IsInputError(err) {
				return toolError(fmt.Sprintf("invalid input for skill %q: %v", sk.Name, err)), nil
			}
			return toolError(fmt.Sprintf("skillrun could not run skill %q: %v", sk.Name, err)), nil
		}
		return resultOf(res), nil
	}
}

// runCold runs sk in a sandbox started for the call (runner.Run), as
// the server's busy work (Options.Busy), as a pool's launch is.
func (s *Server) runCold(ctx context.Context, sk *spec.Skill, in *runner.Input, opts runner.Options) (*runner.Result, error) {
	defer s.work.start()()
	return runner.Run(ctx, s.opts.Runtime, sk, in, opts)
}

var errShutdown = errors.New("the server is shutting down")

// observe fills in the call's session and returns what reports the call
// to Options.Observe once it has been answered (deferred by every tool).
func (s *Server) observe(req *mcp.CallToolRequest, call *Call, start time.Time) func() {
	if req != nil && req.Session != nil {
		call.Session = req.Session.ID()
	}
	obs := s.opts.Observe
	if obs == nil {
		return func() {}
	}
	return func() {
		call.Duration = time.Since(start)
		obs(*call)
	}
}

// refusedByGrants is why the operator's grants refuse every call of sk
// ("" when they do not).
func (s *Server) refusedByGrants(sk *spec.Skill) string {
	g := s.opts.Run.Grants
	if s.opts.WorkspaceRoot != "" && wantsWorkspace(sk) {
		g.Workspace = s.opts.WorkspaceRoot // each session gets one
	}
	_, err := spec.Resolve(sk, spec.WithGrants(g))
	if pe := (*spec.PolicyError)(nil); errors.As(err, &pe) {
		return pe.Error()
	}
	return ""
}

// wantsWorkspace reports whether sk's manifest asks for a workspace.
func wantsWorkspace(sk *spec.Skill) bool {
	ws := sk.Manifest.Filesystem.Workspace
	return ws == spec.WorkspaceRequired || ws == spec.WorkspaceOptional
}

// resultOf turns a skill result into a tool result: the envelope as
// structured content, and for the model a short text: a one-line
// explanation first when the skill failed or was stopped, then its output
// (its stderr's tail too when it failed), cut at textLimit, and a status
// line.
func resultOf(res *runner.Result) *mcp.CallToolResult {
	b, err := json.Marshal(res)
	if err != nil {
		return toolError(fmt.Sprintf("encode result of skill %q: %v", res.Skill, err))
	}
	var text strings.Builder
	if !res.OK {
		text.WriteString(failure(res) + "\n")
	}
	text.WriteString(briefOutput(res))
	fmt.Fprintf(&text, "[exit %d, %d ms]", res.ExitCode, res.Usage.WallMS)
	return &mcp.CallToolResult{StructuredContent: json.RawMessage(b), IsError: !res.OK,
		Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}}
}

// briefOutput is a run's output for the model's text block: stdout (as
// text, or compact JSON), the stderr tail when the run failed, cut at
// textLimit; ends with a newline unless empty.
func briefOutput(res *runner.Result) string {
	out := ""
	switch o := res.Output.(type) {
	case string:
		out = o
	case json.RawMessage:
		var c bytes.Buffer
		if json.Compact(&c, o) == nil {
			out = c.String()
		} else {
			out = string(o)
		}
	}
	if !res.OK && res.Stderr != "" {
		if out != "" && !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		out += res.Stderr
	}
	if len(out) > textLimit {
		cut := textLimit
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut] + fmt.Sprintf("\n[... %d more bytes in structuredContent]", len(out)-cut)
	}
	if out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	return out
}

// failure says in one line why a run did not succeed.
func failure(res *runner.Result) string {
	switch res.StoppedReason {
	case runner.StoppedPolicy:
		return fmt.Sprintf("policy refusal: skill %q needs a grant the server operator did not give: %s", res.Skill, res.Error)
	case runner.StoppedTimeout:
		return fmt.Sprintf("timeout: skill %q %s", res.Skill, res.Error)
	case "":
		return fmt.Sprintf("skill %q failed: exit code %d", res.Skill, res.ExitCode)
	}
	return fmt.Sprintf("skill %q stopped (%s): %s", res.Skill, res.StoppedReason, res.Error)
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// textOf is the text of a result's first text block.
func textOf(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			return tc.Text
		}
	}
	return ""
}
