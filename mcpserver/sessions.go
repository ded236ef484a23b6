package mcpserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/runner"
	"github.com/skillrun/skillrun/spec"
)

// Defaults of the per-session workspace bounds (Options).
const (
	// DefaultWorkspaceQuota bounds the bytes of one session's workspace.
	DefaultWorkspaceQuota = 256 << 20
	// DefaultMaxSessions bounds the sessions holding a workspace at once.
	DefaultMaxSessions = 64
	// DefaultFileLimit caps write_file's content, read_file's and a
	// run_command's stdin.
	DefaultFileLimit = 4 << 20
	// maxWorkspaceEntries bounds the walk of a workspace (quota, changed
	// files, resources): past it the workspace counts as over its quota.
	maxWorkspaceEntries = 10000
)

// session is what the server keeps for one MCP session (stdio: the one
// session; HTTP: each Mcp-Session-Id): its workspace, bound at
// /workspace for every command it runs and never visible to another.
type session struct {
	id string
	// dir is the workspace ("" when the server has none); own says it is
	// the session's own (under Options.WorkspaceRoot, removed at its end).
	dir string
	own bool
	// owner is the workspace's owner, given to the files write_file makes
	// (-1: keep the server's).
	owner [2]int
	// pools are the session's warm command sandboxes, per skill
	// (spec.BareName: without one); guarded by Server.mu. They are the
	// session's: its workspace is bound in them at launch.
	pools map[string]*pool
}

// errTooManySessions refuses a session beyond Options.MaxSessions.
var errTooManySessions = errors.New("too many sessions")

// sessionOf returns ss's session, made at its first call: with a
// workspace root, a fresh folder for it (as root owned by nobody, the
// sandbox's user: commands of the session write it), removed when the
// session ends unless KeepWorkspaces.
func (s *Server) sessionOf(ss *mcp.ServerSession) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if se, ok := s.sessions[ss]; ok {
		return se, nil
	}
	if s.closed {
		return nil, errShutdown
	}
	se := &session{owner: [2]int{-1, -1}, dir: s.opts.Run.Workspace}
	if se.dir != "" {
		se.owner = ownerOf(se.dir)
	}
	if ss != nil {
		se.id = ss.ID()
	}
	if root := s.opts.WorkspaceRoot; root != "" {
		own := 0
		for _, o := range s.sessions {
			if o.own {
				own++
			}
		}
		if own >= s.maxSessions() {
			return nil, fmt.Errorf("%w: %d sessions hold a workspace (--max-sessions %d); retry when one ends", errTooManySessions, own, s.maxSessions())
		}
		var b [8]byte
		_, _ = rand.Read(b[:])
		dir := filepath.Join(root, "session-"+hex.EncodeToString(b[:]))
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
		if os.Geteuid() == 0 {
			// The sandbox maps to the workspace's owner; never root.
			if err := os.Chown(dir, 65534, 65534); err != nil {
				os.Remove(dir)
				return nil, fmt.Errorf("workspace: %w", err)
			}
			se.owner = [2]int{65534, 65534}
		}
		se.dir, se.own = dir, true
	}
	s.sessions[ss] = se
	if ss != nil {
		go func() {
			_ = ss.Wait()
			s.endSession(ss)
		}()
	}
	return se, nil
}

// endSession forgets ss and removes its own workspace (unless
// KeepWorkspaces). Commands still running for it end with their context.
func (s *Server) endSession(ss *mcp.ServerSession) {
	s.mu.Lock()
	se, ok := s.sessions[ss]
	delete(s.sessions, ss)
	var pools []*pool
	if ok {
		for _, p := range se.pools {
			pools = append(pools, p)
		}
		se.pools = nil
		s.ending.Add(1) // under mu: a Close that follows waits for it
	}
	s.mu.Unlock()
	if ok {
		defer s.ending.Done()
		s.endSessionState(se, pools)
	}
}

// endSessionState destroys a session's warm sandboxes, then its
// workspace (unless KeepWorkspaces).
func (s *Server) endSessionState(se *session, pools []*pool) {
	closePools(pools, true)
	if se.own && !s.opts.KeepWorkspaces {
		_ = os.RemoveAll(se.dir)
	}
}

// commandPool returns the session's pool of warm command sandboxes of sk
// (made at its first use), or nil without pools: EntryCommand sandboxes
// wait for any command, EntryPython ones have python3 started, waiting
// for a python3 command (no interpreter start in the call).
func (s *Server) commandPool(se *session, sk *spec.Skill, opts runner.Options, when runner.StartEntry) *pool {
	if s.opts.Pool <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	key := sk.Name
	if when == runner.EntryPython {
		key += "\x00python"
	}
	if p, ok := se.pools[key]; ok {
		return p
	}
	if se.pools == nil {
		se.pools = map[string]*pool{}
	}
	opts.Exec = &runner.Exec{}
	p := newPool(s.opts.Runtime, sk, opts, s.opts.Pool, s.opts.PoolMaxAge, s.opts.Warn, when, s.work)
	se.pools[key] = p
	return p
}

func (s *Server) maxSessions() int {
	if s.opts.MaxSessions > 0 {
		return s.opts.MaxSessions
	}
	return DefaultMaxSessions
}

func (s *Server) quota() int64 {
	if s.opts.WorkspaceQuota > 0 {
		return s.opts.WorkspaceQuota
	}
	return DefaultWorkspaceQuota
}

func (s *Server) fileLimit() int64 {
	if s.opts.FileLimit > 0 {
		return s.opts.FileLimit
	}
	return DefaultFileLimit
}

// wsFile is one regular file of a workspace.
type wsFile struct {
	Path  string    `json:"path"`
	Size  int64     `json:"size"`
	mtime time.Time // compared, not reported
}

// scan lists the regular files of dir (symlinks and other special files
// are not followed nor listed) and their total size; over is set when the
// walk stopped at maxWorkspaceEntries.
func scan(dir string) (files map[string]wsFile, total int64, over bool) {
	files = map[string]wsFile{}
	if dir == "" {
		return files, 0, false
	}
	n := 0
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if n++; n > maxWorkspaceEntries {
			over = true
			return fs.SkipAll
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = wsFile{Path: filepath.ToSlash(rel), Size: fi.Size(), mtime: fi.ModTime()}
		total += fi.Size()
		return nil
	})
	return files, total, over
}

// changed lists the files of after that are new or changed since before,
// sorted by path.
func changed(before, after map[string]wsFile) []wsFile {
	out := []wsFile{}
	for p, f := range after {
		if b, ok := before[p]; !ok || b.Size != f.Size || !b.mtime.Equal(f.mtime) {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// checkQuota refuses a call when the session's workspace is over its
// quota (or would be with extra more bytes).
func (s *Server) checkQuota(se *session, extra int64) error {
	if se.dir == "" {
		return nil
	}
	_, total, over := scan(se.dir)
	if over || total+extra > s.quota() {
		return fmt.Errorf("workspace: %d bytes in use (+%d) is over its quota of %d bytes (--workspace-quota): remove files first", total, extra, s.quota())
	}
	return nil
}

// ownerOf is the owner of dir, for files made in it as root.
func ownerOf(dir string) [2]int {
	if os.Geteuid() != 0 {
		return [2]int{-1, -1}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return [2]int{-1, -1}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return [2]int{-1, -1}
	}
	return [2]int{int(st.Uid), int(st.Gid)}
}
