package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/runtime"
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
	Run runner.Options
	// Name and Version identify the server to clients.
	Name, Version string
	// Pool is how many warm sandboxes each skill keeps launched ahead of
	// its calls (0: none, every call runs cold). Skills in input mode
	// argv always run cold.
	Pool int
	// PoolMaxAge recycles a warm sandbox that waited longer for a call
	// (0: DefaultPoolMaxAge).
	PoolMaxAge time.Duration
	// Warn receives what goes wrong in the background (a warm sandbox
	// that fails to launch); nil discards.
	Warn func(string)
	// Observe, when set, is called once per tool call when it has been
	// answered (the server itself never logs).
	Observe func(Call)
	// With are packages the operator adds to every skill's environment
	// (spec.Skill.WithPackages).
	With []string
	// ShowRefused lists the tools of skills every call of which the
	// operator's grants refuse (marked in their description); by default
	// they are hidden, with a warning.
	ShowRefused bool
	// Commands serves run_command (a command in a skill's sandbox, or in
	// one without a skill), write_file and read_file, and the session's
	// workspace files as workspace:// resources.
	Commands bool
	// WorkspaceRoot, when set, gives each session a workspace of its own
	// below it, made at its first call and bound at /workspace for every
	// command of that session (and every call of a skill that asks for a
	// workspace); removed when the session ends unless KeepWorkspaces.
	// Without it, Run.Workspace is every session's.
	WorkspaceRoot  string
	KeepWorkspaces bool
	// WorkspaceQuota bounds a session workspace's bytes, checked before
	// each command and write (0: DefaultWorkspaceQuota).
	WorkspaceQuota int64
	// MaxSessions bounds the sessions holding a workspace (0:
	// DefaultMaxSessions).
	MaxSessions int
	// FileLimit caps write_file and read_file contents and a command's
	// stdin (0: DefaultFileLimit).
	FileLimit int64
	// Busy, when set, is called with true when the server starts work
	// that wants every CPU (a sandbox's launch, a cold run, a warm call
	// whose traffic it relays) while none was going on, and with false
	// when the last of it ends; calls come one at a time, in order. A
	// warm call without network is not such work. The server
	// changes nothing of the process itself: its caller may (the
	// command line runs Go on one processor while the server is not
	// busy).
	Busy func(busy bool)
}

// Call is what Options.Observe learns of one tool call: never its input
// or output.
type Call struct {
	// Tool is the tool called: a skill's name, or run_command, write_file
	// or read_file.
	Tool string
	// Skill is the tool's skill (spec.BareName for a command without
	// one); Session the MCP session's ID ("" on stdio).
	Skill, Session string
	// Command is a run_command's program (its argv[0]), never its
	// arguments.
	Command string
	// Warm is true when the call took a warm sandbox.
	Warm bool
	// Duration is from the call's arrival to its answer.
	Duration time.Duration
	// Result is the run's result (nil when nothing ran).
	Result *runner.Result
	// Err is why nothing ran or skillrun failed (bad input, shutdown).
	Err error
}

// Outcome names the call's end in one word: "ok", "failed" (the skill
// exited non-zero), a runner.Stopped* reason, "bad_input" or "error". A
// call that runs nothing (write_file, read_file) is "ok" without an Err.
func (c Call) Outcome() string {
	switch {
	case c.Result == nil && c.Err == nil:
		return "ok"
	case c.Result != nil && c.Result.OK:
		return "ok"
	case c.Result != nil && c.Result.StoppedReason != "":
		return c.Result.StoppedReason
	case c.Result != nil:
		return "failed"
	case runner.IsInputError(c.Err):
		return "bad_input"
	}
	return "error"
}

// Server serves skills as MCP tools.
type Server struct {
	opts Options
	mcp  *mcp.Server
	// work counts the launches, cold runs and relayed warm calls in
	// flight (Options.Busy).
	work *busy

	mu       sync.Mutex // guards the fields below
	served   map[string]served
	order    []string // tool names in load order
	warnings []string
	retired  []*pool // pools of skills changed or removed
	sessions map[*mcp.ServerSession]*session
	closed   bool
	// posts are the HTTP requests in flight by their key (HTTPHandler).
	posts map[string]context.Context

	// Every call's context ends with stop (Close); calls counts the
	// handlers running.
	stop    context.Context
	stopAll context.CancelFunc
	calls   sync.WaitGroup
	closing sync.Once
	// ending counts the sessions being ended (endSession): Close waits
	// for them, so a server that exits as its last session ends (stdio)
	// still removes that session's workspace.
	ending sync.WaitGroup
}

// served is one skill served as a tool, and what it was made from (to see
// a change on disk).
type served struct {
	skill *spec.Skill
	tool  *mcp.Tool
	sig   string // the tool definition and manifest as JSON, the folder, the files' digests
	pool  *pool  // nil: every call runs cold
	entry SkillEntry
	files []skillFile
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
	for _, d := range opts.Dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("skills folder %q: not a folder", d)
		}
	}
	if opts.WorkspaceRoot != "" {
		if err := os.MkdirAll(opts.WorkspaceRoot, 0o711); err != nil {
			return nil, fmt.Errorf("workspace root %q: %w", opts.WorkspaceRoot, err)
		}
		if fi, err := os.Stat(opts.WorkspaceRoot); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("workspace root %q: not a folder", opts.WorkspaceRoot)
		}
	}
	s := &Server{opts: opts, work: &busy{f: opts.Busy}, served: map[string]served{}, sessions: map[*mcp.ServerSession]*session{}}
	s.stop, s.stopAll = context.WithCancel(context.Background())
	caps := &mcp.ServerCapabilities{
		Logging:   &mcp.LoggingCapabilities{},
		Tools:     &mcp.ToolCapabilities{ListChanged: true},
		Resources: &mcp.ResourceCapabilities{ListChanged: true},
	}
	caps.AddExtension(SkillsExtension, nil)
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: opts.Version}, &mcp.ServerOptions{Capabilities: caps})
	if err := s.addSkillsMethods(); err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	if opts.Commands {
		s.addCommandTools()
	}
	s.warnings = s.sync()
	return s, nil
}

// load finds and loads every skill under the folders.
func (s *Server) load() (map[string]served, []string, []string) {
	out := map[string]served{}
	var order, warnings []string
	for _, d := range s.opts.Dirs {
		found, err := FindSkills(d)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("skills folder %q: %v", d, err))
			continue
		}
		if len(found) == 0 {
			warnings = append(warnings, fmt.Sprintf("skills folder %q: no skill (folder with %s) found", d, spec.SkillFile))
		}
		for _, dir := range found {
			sk, err := spec.Load(dir)
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("skill %q skipped: %s", dir, strings.ReplaceAll(err.Error(), "\n", "; ")))
				continue
			}
			if s.opts.Commands && (reservedTools[sk.Name] || reservedTools[filepath.Base(dir)]) {
				warnings = append(warnings, fmt.Sprintf("skill %q skipped: %q is the name of a tool of the server (run_command, write_file, read_file)", dir, filepath.Base(dir)))
				continue
			}
			if prev, dup := out[sk.Name]; dup {
				warnings = append(warnings, fmt.Sprintf("skill %q skipped: name %q already served from %q", dir, sk.Name, prev.skill.Dir))
				continue
			}
			if len(s.opts.With) > 0 {
				if err := sk.WithPackages(s.opts.With); err != nil {
					warnings = append(warnings, fmt.Sprintf("skill %q skipped: %v", dir, err))
					continue
				}
			}
			for _, w := range sk.Warnings {
				warnings = append(warnings, fmt.Sprintf("skill %q: %s", sk.Name, w))
			}
			// A skill without an entry point is served for its
			// instructions and files (Skills over MCP), with no tool of
			// its own: it cannot be called, only used.
			var t *mcp.Tool
			if sk.HasEntry() {
				if t, err = Tool(sk); err != nil {
					warnings = append(warnings, fmt.Sprintf("skill %q skipped: %v", dir, err))
					continue
				}
				// A tool every call of which the operator's grants refuse
				// is hidden (or listed, marked, with ShowRefused).
				if reason := s.refusedByGrants(sk); reason != "" {
					if !s.opts.ShowRefused {
						warnings = append(warnings, fmt.Sprintf("skill %q: no tool: every call would be refused: %s (--show-refused lists it)", sk.Name, reason))
						t = nil
					} else {
						t.Description = "[refused by this server's grants: " + reason + "] " + t.Description
					}
				}
			}
			files, err := skillFiles(sk)
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("skill %q: files not all served as resources: %v", dir, err))
			}
			tb, _ := json.Marshal(t)
			mb, _ := json.Marshal(sk.Manifest)
			var digests strings.Builder
			for _, f := range files {
				digests.WriteString(f.res.URI + " " + f.res.Digest + "\n")
			}
			entry := skillEntry(sk, files)
			if t == nil {
				entry.Tool = "" // no tool served for it
			}
			out[sk.Name] = served{skill: sk, tool: t, sig: string(tb) + "\x00" + string(mb) + "\x00" + dir + "\x00" + digests.String(),
				entry: entry, files: files}
			order = append(order, sk.Name)
		}
	}
	return out, order, warnings
}

// sync loads the skills again and brings the served tools in line: new
// and changed skills are (re)added, vanished ones removed. The SDK tells
// connected clients (notifications/tools/list_changed). It returns the
// load's warnings.
//
// The warm sandboxes of a changed or removed skill are destroyed before
// sync returns (calls they serve end on their own).
func (s *Server) sync() []string {
	now, order, warnings := s.load()
	var drain []*pool
	defer func() {
		closePools(drain, false)
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return warnings
	}
	var gone, goneURIs []string
	for name, old := range s.served {
		n, ok := now[name]
		if (!ok || n.tool == nil) && old.tool != nil {
			gone = append(gone, name)
		}
		if !ok && old.pool != nil {
			drain = append(drain, old.pool)
		}
		if !ok || n.sig != old.sig {
			for _, f := range old.files {
				goneURIs = append(goneURIs, f.res.URI)
			}
		}
	}
	if len(gone) > 0 {
		s.mcp.RemoveTools(gone...)
	}
	if len(goneURIs) > 0 {
		s.mcp.RemoveResources(goneURIs...)
	}
	for _, name := range order {
		n := now[name]
		old, ok := s.served[name]
		if ok && old.sig == n.sig {
			now[name] = old
			continue
		}
		if ok && old.pool != nil {
			drain = append(drain, old.pool)
		}
		if n.tool != nil && s.opts.Pool > 0 && poolable(n.skill) {
			n.pool = newPool(s.opts.Runtime, n.skill, s.opts.Run, s.opts.Pool, s.opts.PoolMaxAge, s.opts.Warn, runner.EntryAtLaunch, s.work)
			now[name] = n
		}
		if n.tool != nil {
			s.mcp.AddTool(n.tool, s.handler(n.skill, n.pool))
		}
		for _, f := range n.files {
			rel := strings.TrimPrefix(f.res.URI, "skill://")
			s.mcp.AddResource(&mcp.Resource{URI: f.res.URI, Name: rel, MIMEType: f.res.MIMEType, Size: f.res.Size,
				Meta: mcp.Meta{"digest": f.res.Digest}}, resourceHandler(f))
		}
	}
	s.retired = append(s.retired, drain...)
	s.served, s.order = now, order
	return warnings
}

// Close ends every call in flight (its sandbox is killed and removed, the
// call answers "interrupted"), destroys every warm sandbox and returns
// once all are gone. The transports may still deliver calls afterwards:
// they are refused. Calls of Close at the same time all return once
// it is done.
func (s *Server) Close() { s.closing.Do(s.close) }

func (s *Server) close() {
	s.mu.Lock()
	s.closed = true
	s.stopAll()
	s.mu.Unlock()
	s.calls.Wait()
	s.mu.Lock()
	pools := append([]*pool(nil), s.retired...)
	type ended struct {
		se    *session
		pools []*pool
	}
	sessions := make([]ended, 0, len(s.sessions))
	for ss, se := range s.sessions {
		e := ended{se: se}
		for _, p := range se.pools {
			e.pools = append(e.pools, p)
		}
		se.pools = nil
		sessions = append(sessions, e)
		delete(s.sessions, ss)
	}
	for _, n := range s.served {
		if n.pool != nil {
			pools = append(pools, n.pool)
		}
	}
	s.mu.Unlock()
	for _, e := range sessions {
		pools = append(pools, e.pools...)
	}
	closePools(pools, true)
	for _, e := range sessions {
		s.endSessionState(e.se, nil)
	}
	s.ending.Wait()
}

// PoolStats returns, per skill with a pool, how many calls took a warm
// sandbox and how many sandboxes are ready.
func (s *Server) PoolStats() map[string][2]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][2]int{}
	for name, n := range s.served {
		if n.pool != nil {
			st, ready := n.pool.snapshot()
			out[name] = [2]int{st.Warm, ready}
		}
	}
	return out
}

// Watch rescans the skill folders every interval until ctx ends, so that
// skills added, removed or changed on disk update the tool list
// (listChanged). Warnings of a rescan that differ from the previous
// one's go to warn (nil discards).
func (s *Server) Watch(ctx context.Context, interval time.Duration, warn func(string)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	prev := strings.Join(s.Warnings(), "\n")
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w := s.sync()
		if j := strings.Join(w, "\n"); j != prev && warn != nil {
			for _, m := range w {
				warn(m)
			}
			prev = j
		}
	}
}

// MCP returns the SDK server, to be run on a transport.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Tools returns the tool definitions served, in load order (skills
// without an entry point have none).
func (s *Server) Tools() []*mcp.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*mcp.Tool, 0, len(s.order))
	for _, n := range s.order {
		if t := s.served[n].tool; t != nil {
			out = append(out, t)
		}
	}
	return out
}

// Warnings returns what New skipped and why.
func (s *Server) Warnings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.warnings
}
