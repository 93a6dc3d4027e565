package skills

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testToken = "s3cret-token"

// The Streamable HTTP details the fake provider checks.
const (
	providerVersion          = "2025-06-18"
	mcpSessionHeader         = "Mcp-Session-Id"
	mcpProtocolVersionHeader = "MCP-Protocol-Version"
)

// mcpServer is a real HTTP server speaking the MCP Streamable HTTP subset the
// remote provider uses: initialize + sessions, resources/list with cursors,
// resources/read; JSON or SSE responses; bearer auth.
type mcpServer struct {
	t   *testing.T
	srv *httptest.Server

	mu           sync.Mutex
	pages        [][]map[string]any
	contents     map[string]string
	sse          bool
	failPage     int // 1-based page that answers HTTP 500; 0 = none
	repeatCursor bool
	sessions     map[string]bool
	nextSession  int
	methods      []string
}

func newMCPServer(t *testing.T) *mcpServer {
	s := &mcpServer{t: t, contents: map[string]string{}, sessions: map[string]bool{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// skillResource is an mcp/skill resource as the apps server lists it.
func skillResource(uri, plugin, skill, description string) map[string]any {
	meta := map[string]any{"skill_name": skill}
	if plugin == "" {
		meta["source"] = "user"
	} else {
		meta["plugin_name"] = plugin
	}
	return map[string]any{"uri": uri, "name": skill, "description": description, "mimeType": SkillMIMEType, "_meta": meta}
}

func (s *mcpServer) setPages(pages ...[]map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pages = pages
}

func (s *mcpServer) setContent(uri, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.contents[uri] = text
}

// expireSessions forgets every session, as a restarted server would.
func (s *mcpServer) expireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.sessions)
}

func (s *mcpServer) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.methods...)
}

func (s *mcpServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+testToken {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Cursor string `json:"cursor"`
			URI    string `json:"uri"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.methods = append(s.methods, req.Method)
	if req.Method == "initialize" {
		s.nextSession++
		id := fmt.Sprintf("session-%d", s.nextSession)
		s.sessions[id] = true
		w.Header().Set(mcpSessionHeader, id)
		s.reply(w, req.ID, map[string]any{"protocolVersion": providerVersion, "capabilities": map[string]any{"resources": map[string]any{}}, "serverInfo": map[string]any{"name": "fake", "version": "1"}})
		return
	}
	if !s.sessions[r.Header.Get(mcpSessionHeader)] {
		http.Error(w, "unknown session", http.StatusNotFound)
		return
	}
	if r.Header.Get(mcpProtocolVersionHeader) != providerVersion {
		http.Error(w, "missing protocol version", http.StatusBadRequest)
		return
	}
	switch req.Method {
	case "notifications/initialized":
		w.WriteHeader(http.StatusAccepted)
	case "resources/list":
		page := 0
		if req.Params.Cursor != "" {
			page, _ = strconv.Atoi(strings.TrimPrefix(req.Params.Cursor, "page-"))
		}
		if s.failPage != 0 && page+1 == s.failPage {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		res := map[string]any{"resources": []map[string]any{}}
		if page < len(s.pages) {
			res["resources"] = s.pages[page]
		}
		switch {
		case s.repeatCursor:
			res["nextCursor"] = "page-1"
		case page+1 < len(s.pages):
			res["nextCursor"] = fmt.Sprintf("page-%d", page+1)
		}
		s.reply(w, req.ID, res)
	case "resources/read":
		text, ok := s.contents[req.Params.URI]
		if !ok {
			s.replyError(w, req.ID, -32002, "Resource not found")
			return
		}
		s.reply(w, req.ID, map[string]any{"contents": []map[string]any{
			{"uri": req.Params.URI + "-other", "mimeType": "text/markdown", "text": "not this one"},
			{"uri": req.Params.URI, "mimeType": "text/markdown", "text": text},
		}})
	default:
		s.replyError(w, req.ID, -32601, "Method not found")
	}
}

func (s *mcpServer) reply(w http.ResponseWriter, id json.RawMessage, result any) {
	s.write(w, map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func (s *mcpServer) replyError(w http.ResponseWriter, id json.RawMessage, code int, msg string) {
	s.write(w, map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
}

func (s *mcpServer) write(w http.ResponseWriter, msg map[string]any) {
	b, err := json.Marshal(msg)
	require.NoError(s.t, err)
	if !s.sse {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	// A server notification first, then the response split over two data
	// lines (between tokens: SSE joins data lines with a newline).
	_, _ = fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n")
	half := strings.IndexByte(string(b), ',') + 1
	_, _ = fmt.Fprintf(w, "id: 1\nevent: message\ndata: %s\ndata: %s\n\n", b[:half], b[half:])
}

func newTestRemote(t *testing.T, s *mcpServer, env map[string]string) *RemoteProvider {
	if env == nil {
		env = map[string]string{"SKILLS_TOKEN": testToken}
	}
	p, err := NewRemoteProvider("codex_apps", RemoteConfig{URL: s.srv.URL + "/mcp", BearerTokenEnv: "SKILLS_TOKEN"}, RemoteOptions{
		Getenv: func(k string) string { return env[k] },
	})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

func TestRemoteListAndRead(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			s := newMCPServer(t)
			s.sse = sse
			s.setPages(
				[]map[string]any{
					skillResource("skill://plugin_demo/deploy", "demo-plugin", "deploy", "Deploy <apps> &\n  more"),
					{"uri": "file:///readme", "name": "readme", "mimeType": "text/plain"},
					skillResource("skill://plugin_demo/bad/../x", "demo-plugin", "bad", "bad uri"),
					skillResource("skill://plugin_demo/tagged", "demo-plugin", "<b>", "bad name"),
				},
				[]map[string]any{
					skillResource("skill://user_skills/notes", "", "notes", "User notes"),
					skillResource("skill://user_skills/ctl", "", "ctl", "has a \x07 bell"),
					{"uri": "skill://user_skills/nometa", "name": "nometa", "mimeType": SkillMIMEType},
					skillResource("skill://plugin_demo/deploy", "demo-plugin", "deploy", "duplicate package"),
				},
			)
			s.setContent("skill://plugin_demo/deploy/SKILL.md", "# Deploy 🚀\n")
			p := newTestRemote(t, s, nil)
			ctx := testCtx(t)

			assert.Equal(t, Authority{Kind: KindRemote, ID: "codex_apps"}, p.Authority())
			l, err := p.List(ctx, Query{})
			require.NoError(t, err)
			require.Len(t, l.Entries, 2)
			assert.Equal(t, Entry{
				Package: "skill://plugin_demo/deploy", Name: "demo-plugin:deploy", Description: "Deploy &lt;apps&gt; &amp; more",
				MainResource: "skill://plugin_demo/deploy/SKILL.md", Enabled: true, Path: "skill://plugin_demo/deploy",
			}, l.Entries[0])
			assert.Equal(t, "notes", l.Entries[1].Name, "user skills are not qualified")
			assert.Equal(t, []string{"skipped 5 malformed remote skill resources"}, l.Warnings)

			e, err := p.Lookup(ctx, Query{}, "skill://plugin_demo/deploy")
			require.NoError(t, err)
			assert.Equal(t, "demo-plugin:deploy", e.Name)
			_, err = p.Lookup(ctx, Query{}, "skill://plugin_demo/gone")
			assert.ErrorIs(t, err, ErrPackageUnavailable)

			res, err := p.Read(ctx, Query{}, "skill://plugin_demo/deploy", "skill://plugin_demo/deploy/SKILL.md")
			require.NoError(t, err)
			assert.Equal(t, Resource{ID: "skill://plugin_demo/deploy/SKILL.md", Text: "# Deploy 🚀\n"}, res)

			_, err = p.Read(ctx, Query{}, "skill://plugin_demo/deploy", "skill://plugin_demo/deploy/missing.md")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "MCP error -32002: Resource not found")

			// One session for everything.
			calls := s.calls()
			assert.Equal(t, "initialize", calls[0])
			assert.Equal(t, "notifications/initialized", calls[1])
			assert.Equal(t, 1, strings.Count(strings.Join(calls, ","), "initialize,"))
		})
	}
}

func TestRemoteDiscoveryLimitsAndFailures(t *testing.T) {
	page := func(from, n int) []map[string]any {
		var out []map[string]any
		for i := from; i < from+n; i++ {
			out = append(out, skillResource(fmt.Sprintf("skill://p/s%03d", i), "", fmt.Sprintf("s%03d", i), "d"))
		}
		return out
	}
	t.Run("first page fails", func(t *testing.T) {
		s := newMCPServer(t)
		s.failPage = 1
		_, err := newTestRemote(t, s, nil).List(testCtx(t), Query{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "remote skill discovery failed: the provider answered HTTP 500")
	})
	t.Run("later page fails", func(t *testing.T) {
		s := newMCPServer(t)
		s.setPages(page(0, 2), page(2, 2), page(4, 2))
		s.failPage = 2
		l, err := newTestRemote(t, s, nil).List(testCtx(t), Query{})
		require.NoError(t, err)
		assert.Len(t, l.Entries, 2)
		assert.Equal(t, []string{"remote skill discovery stopped after 1 resource pages: the provider answered HTTP 500"}, l.Warnings)
	})
	t.Run("repeated cursor", func(t *testing.T) {
		s := newMCPServer(t)
		s.setPages(page(0, 1), page(1, 1))
		s.repeatCursor = true
		l, err := newTestRemote(t, s, nil).List(testCtx(t), Query{})
		require.NoError(t, err)
		assert.Len(t, l.Entries, 2)
		assert.Equal(t, []string{"remote skill discovery stopped: the provider repeated a resources/list cursor"}, l.Warnings)
	})
	t.Run("ten pages", func(t *testing.T) {
		s := newMCPServer(t)
		var pages [][]map[string]any
		for i := range 12 {
			pages = append(pages, page(i, 1))
		}
		s.setPages(pages...)
		l, err := newTestRemote(t, s, nil).List(testCtx(t), Query{})
		require.NoError(t, err)
		assert.Len(t, l.Entries, 10)
		assert.Equal(t, []string{"remote skill discovery stopped after 10 resource pages"}, l.Warnings)
	})
	t.Run("hundred skills", func(t *testing.T) {
		s := newMCPServer(t)
		s.setPages(page(0, 60), page(60, 60))
		l, err := newTestRemote(t, s, nil).List(testCtx(t), Query{})
		require.NoError(t, err)
		assert.Len(t, l.Entries, 100)
		assert.Equal(t, []string{"remote skill discovery stopped at 100 skills"}, l.Warnings)
	})
}

func TestRemoteAuthAndSessions(t *testing.T) {
	s := newMCPServer(t)
	s.setPages([]map[string]any{skillResource("skill://p/a", "", "a", "d")})

	_, err := newTestRemote(t, s, map[string]string{}).List(testCtx(t), Query{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the bearer token variable SKILLS_TOKEN is not set")

	_, err = newTestRemote(t, s, map[string]string{"SKILLS_TOKEN": "wrong"}).List(testCtx(t), Query{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "authentication failed (HTTP 401)")

	p := newTestRemote(t, s, nil)
	_, err = p.List(testCtx(t), Query{})
	require.NoError(t, err)
	s.expireSessions()
	l, err := p.List(testCtx(t), Query{})
	require.NoError(t, err, "an expired session is set up again transparently")
	assert.Len(t, l.Entries, 1)
}

func TestNewRemoteProviderValidates(t *testing.T) {
	for _, tc := range []struct {
		id  string
		cfg RemoteConfig
	}{
		{"bad id!", RemoteConfig{URL: "https://x"}},
		{"", RemoteConfig{URL: "https://x"}},
		{"ok", RemoteConfig{URL: "ftp://x"}},
		{"ok", RemoteConfig{URL: "not a url"}},
	} {
		_, err := NewRemoteProvider(tc.id, tc.cfg, RemoteOptions{})
		assert.Error(t, err, "%q %q", tc.id, tc.cfg.URL)
	}
}
