package mcpserver

import (
	"context"
	"net/http"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/appserver/appserver/internal/principal"
)

// sessionHeader names a streamable HTTP session.
const sessionHeader = "Mcp-Session-Id"

// httpSession is one streamable HTTP session and who owns it.
type httpSession struct {
	t     *mcp.StreamableServerTransport
	sess  *session
	owner string // the owning principal's name ("" the operator): no one else may use it
}

// HTTPHandler serves MCP over streamable HTTP. identify returns who an
// (already authenticated) request acts for; a session belongs to the
// principal that initialized it, and is unknown (404) to any other.
func (s *Server) HTTPHandler(identify func(*http.Request) principal.Principal) http.Handler {
	return &httpHandler{s: s, identify: identify, byID: map[string]*httpSession{}}
}

type httpHandler struct {
	s        *Server
	identify func(*http.Request) principal.Principal
	byID     map[string]*httpSession // guarded by s.mu
}

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	who := h.identify(r)
	owner := who.Name()
	id := r.Header.Get(sessionHeader)
	if id == "" {
		if r.Method != http.MethodPost {
			http.Error(w, "Bad Request: missing "+sessionHeader, http.StatusBadRequest)
			return
		}
		h.start(w, r, who, owner)
		return
	}
	h.s.mu.Lock()
	hs := h.byID[id]
	h.s.mu.Unlock()
	if hs == nil || hs.owner != owner {
		http.Error(w, "Not Found: no such session", http.StatusNotFound)
		return
	}
	if r.Method == http.MethodDelete {
		h.drop(id, hs)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	hs.t.ServeHTTP(w, r)
}

// start serves a request that opens a session (initialize); a request
// that did not initialize it leaves no session behind.
func (h *httpHandler) start(w http.ResponseWriter, r *http.Request, who principal.Principal, owner string) {
	id := uuid.NewString()
	t := &mcp.StreamableServerTransport{SessionID: id}
	sess, err := h.s.connect(context.WithoutCancel(r.Context()), t, who)
	if err != nil {
		http.Error(w, "Service Unavailable: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	hs := &httpSession{t: t, sess: sess, owner: owner}
	h.s.mu.Lock()
	h.byID[id] = hs
	h.s.mu.Unlock()
	t.ServeHTTP(w, r)
	if ss := sess.serverSession(); ss == nil || ss.InitializeParams() == nil {
		h.drop(id, hs)
		return
	}
	// The session ends when the host deletes it or the server stops; the
	// watcher forgets it then.
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if h.s.stopped {
		return
	}
	h.s.bg.Go(func() {
		_ = sess.serverSession().Wait()
		h.drop(id, hs)
	})
}

// drop ends a session and forgets it.
func (h *httpHandler) drop(id string, hs *httpSession) {
	h.s.mu.Lock()
	if h.byID[id] == hs {
		delete(h.byID, id)
	}
	h.s.mu.Unlock()
	if ss := hs.sess.serverSession(); ss != nil {
		_ = ss.Close()
	}
	h.s.forget(hs.sess)
}
