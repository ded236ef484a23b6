package mcpserver

// HTTP requests and the calls they carry: a client that goes away
// mid-call must not leave the call's sandbox running.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// requestHeader carries, from HTTPHandler to a call's handler, the key of
// the HTTP request that brought the call. HTTPHandler sets it on every
// POST, replacing any value a client sent.
const requestHeader = "Skillrun-Request"

// errClientGone ends a call whose HTTP request ended before its answer.
var errClientGone = errors.New("the client's request ended before its answer")

// HTTPHandler wraps the SDK's streamable HTTP handler so that a call ends
// (its sandbox killed and removed) when the HTTP request that carried it
// ends before the answer: the client disconnected or gave up. The SDK
// ties a call to the session's connection, not to its POST, for the
// protocol versions with sessions; the answer of such a call can only
// travel on its POST (no event store here), so ending it loses nothing.
func (s *Server) HTTPHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(requestHeader)
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		var b [12]byte
		_, _ = rand.Read(b[:])
		key := hex.EncodeToString(b[:])
		r.Header.Set(requestHeader, key)
		s.mu.Lock()
		if s.posts == nil {
			s.posts = map[string]context.Context{}
		}
		s.posts[key] = r.Context()
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.posts, key)
			s.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// requestContext is the context of the HTTP request that brought req,
// when HTTPHandler saw it: nil for other transports; an ended context
// when that request is already over.
func (s *Server) requestContext(req mcp.Request) context.Context {
	if req == nil {
		return nil
	}
	extra := req.GetExtra()
	if extra == nil || extra.Header == nil {
		return nil
	}
	key := extra.Header.Get(requestHeader)
	if key == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx, ok := s.posts[key]; ok {
		return ctx
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	return ended
}
