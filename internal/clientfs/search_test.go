package clientfs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
)

func writeTree(t *testing.T, root string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(root, f)
		if strings.HasSuffix(f, "/.") {
			require.NoError(t, os.MkdirAll(p, 0o755))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
	}
}

func paths(files api.List[api.FuzzyFileSearchResult]) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out
}

// Matches are ranked by score, then by path; a file named as the query
// ranks first, then the first directory so named, then files whose name
// holds the query; ignore files, the daemon's files and symlink loops
// are left out.
func TestSearchRanking(t *testing.T) {
	h := newHost(t, Config{})
	ctx := context.Background()
	writeTree(t, h.ws,
		"src/abc.go", "src/abc/.", "lib/abc/.", "zabc.txt", "x/abc", "a/b/c.txt",
		".gitignore", "ignored/abc.txt", "notes.log", "keep.log", "sub/.ignore", "sub/abc.tmp")
	require.NoError(t, os.WriteFile(filepath.Join(h.ws, ".gitignore"), []byte("ignored/\n*.log\n!keep.log\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(h.ws, "sub", ".ignore"), []byte("*.tmp\n"), 0o644))
	require.NoError(t, os.Symlink("..", filepath.Join(h.ws, "src", "up")))
	require.NoError(t, os.Symlink(filepath.Dir(h.data), filepath.Join(h.ws, "base")))
	c := h.conn(1, h.operator, newRecorder())

	res, err := h.svc.Search(ctx, c, api.FuzzyFileSearchParams{Query: "abc", Roots: []string{h.ws}})
	require.NoError(t, err)
	require.Equal(t, []string{"x/abc", "lib/abc", "src/abc.go", "zabc.txt", "src/abc", "a/b/c.txt"}, paths(res.Files))
	require.Equal(t, uint32(3<<16+84), res.Files[0].Score)
	require.Equal(t, api.FuzzyMatchDirectory, res.Files[1].MatchType)
	require.Equal(t, []uint32{4, 5, 6}, res.Files[1].Indices)
	for _, f := range res.Files {
		require.NotContains(t, f.Path, "ignored")
		require.NotContains(t, f.Path, ".tmp")
		require.NotContains(t, f.Path, "src/up", "a loop is left out")
		require.NotContains(t, f.Path, "appserver.db", "the daemon's files are left out")
		require.Equal(t, h.ws, f.Root)
	}
	res, err = h.svc.Search(ctx, c, api.FuzzyFileSearchParams{Query: "log", Roots: []string{h.ws}})
	require.NoError(t, err)
	require.Equal(t, []string{"keep.log"}, paths(res.Files))
	res, err = h.svc.Search(ctx, c, api.FuzzyFileSearchParams{Query: "appserver", Roots: []string{h.ws, h.data, "relative", "/nonexistent"}})
	requireCode(t, err, apperr.Forbidden, "protected path of the daemon")
	res, err = h.svc.Search(ctx, c, api.FuzzyFileSearchParams{Query: "abc", Roots: []string{"relative", "/nonexistent"}})
	require.NoError(t, err)
	require.Empty(t, res.Files)
	require.Equal(t, "[]", mustJSON(t, res.Files))

	// A principal's roots.
	ci := h.conn(2, h.ci, newRecorder())
	_, err = h.svc.Search(ctx, ci, api.FuzzyFileSearchParams{Query: "secret", Roots: []string{h.other}})
	requireCode(t, err, apperr.Forbidden, "outside the workspace roots")
	require.NoError(t, os.Symlink(h.other, filepath.Join(h.ws, "out")))
	res, err = h.svc.Search(ctx, ci, api.FuzzyFileSearchParams{Query: "secret", Roots: []string{h.ws}})
	require.NoError(t, err)
	require.Empty(t, res.Files, "a symlink out of the roots is not followed")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// At most MaxResults matches come back, and a walk stops at its bound.
func TestSearchBounds(t *testing.T) {
	h := newHost(t, Config{MaxSearchEntries: 30})
	ctx := context.Background()
	var files []string
	for i := range 80 {
		files = append(files, fmt.Sprintf("d%02d/f%02d.txt", i/10, i))
	}
	writeTree(t, h.ws, files...)
	c := h.conn(1, h.operator, newRecorder())
	res, err := h.svc.Search(ctx, c, api.FuzzyFileSearchParams{Query: "f", Roots: []string{h.ws}})
	require.NoError(t, err)
	require.Len(t, res.Files, 26, "30 entries walked: the root, 3 directories and 26 files")

	h2 := newHost(t, Config{})
	writeTree(t, h2.ws, files...)
	res, err = h2.svc.Search(ctx, h2.conn(1, h2.operator, newRecorder()), api.FuzzyFileSearchParams{Query: "f", Roots: []string{h2.ws}})
	require.NoError(t, err)
	require.Len(t, res.Files, MaxResults)
}

// A search with a cancellation token cancels the connection's earlier
// one with the same token, which answers no files; so does the end of
// its connection.
func TestSearchCancellation(t *testing.T) {
	h := newHost(t, Config{MaxWalks: 1})
	writeTree(t, h.ws, "main.go")
	c := h.conn(1, h.operator, newRecorder())
	// Hold the only walk slot so that the first search waits.
	require.NoError(t, h.svc.acquireWalk(context.Background()))
	// search starts a search with token "t" and waits until it is
	// registered (and waiting for the walk slot).
	search := func() chan api.FuzzyFileSearchResponse {
		out := make(chan api.FuzzyFileSearchResponse, 1)
		tok := "t"
		go func() {
			res, err := h.svc.Search(context.Background(), c, api.FuzzyFileSearchParams{Query: "main", Roots: []string{h.ws}, CancellationToken: &tok})
			require.NoError(t, err)
			out <- res
		}()
		require.Eventually(t, func() bool {
			h.svc.searches.mu.Lock()
			defer h.svc.searches.mu.Unlock()
			return h.svc.searches.tokens[1][tok] != nil
		}, 5*time.Second, time.Millisecond)
		return out
	}
	first := search()
	second := search()
	require.Empty(t, (<-first).Files, "cancelled by the second")
	h.svc.releaseWalk()
	require.Equal(t, []string{"main.go"}, paths((<-second).Files))

	// The end of the connection cancels its searches.
	require.NoError(t, h.svc.acquireWalk(context.Background()))
	third := search()
	h.svc.CloseConn(1)
	require.Empty(t, (<-third).Files)
	h.svc.releaseWalk()
}

func sessionNote(t *testing.T, r *recorder) (string, api.FuzzyFileSearchSessionUpdatedNotification) {
	t.Helper()
	n := r.next(t)
	switch p := n.params.(type) {
	case api.FuzzyFileSearchSessionUpdatedNotification:
		return n.method, p
	case api.FuzzyFileSearchSessionCompletedNotification:
		return n.method, api.FuzzyFileSearchSessionUpdatedNotification{SessionID: p.SessionID}
	}
	t.Fatalf("unexpected %+v", n)
	return "", api.FuzzyFileSearchSessionUpdatedNotification{}
}

// A session sends nothing before it is released, then the empty query's
// update and completion once walked, then both for each query; after
// sessionStop, or once its connection closed, nothing; its goroutine is
// gone (goleak checks the package).
func TestSessionLifeCycle(t *testing.T) {
	h := newHost(t, Config{MaxSessionsPerConn: 2})
	ctx := context.Background()
	writeTree(t, h.ws, "main.go", "src/main_test.go", "README.md")
	rec := newRecorder()
	c := h.conn(1, h.operator, rec)
	start, err := h.svc.StartSession(ctx, c, api.FuzzyFileSearchSessionStartParams{SessionID: "s", Roots: []string{h.ws}})
	require.NoError(t, err)
	rec.none(t, 100*time.Millisecond)
	start()
	m, u := sessionNote(t, rec)
	require.Equal(t, api.NotificationFuzzyFileSearchSessionUpdated, m)
	require.Equal(t, "", u.Query)
	require.Equal(t, "[]", mustJSON(t, u.Files))
	m, _ = sessionNote(t, rec)
	require.Equal(t, api.NotificationFuzzyFileSearchSessionCompleted, m)

	apply, err := h.svc.UpdateSession(c, api.FuzzyFileSearchSessionUpdateParams{SessionID: "s", Query: "main"})
	require.NoError(t, err)
	apply()
	m, u = sessionNote(t, rec)
	require.Equal(t, api.NotificationFuzzyFileSearchSessionUpdated, m)
	require.Equal(t, "main", u.Query)
	require.Equal(t, []string{"main.go", "src/main_test.go"}, paths(u.Files))
	m, _ = sessionNote(t, rec)
	require.Equal(t, api.NotificationFuzzyFileSearchSessionCompleted, m)

	_, err = h.svc.UpdateSession(c, api.FuzzyFileSearchSessionUpdateParams{SessionID: "nope", Query: "x"})
	requireCode(t, err, apperr.Invalid, "fuzzy file search session not found: nope")
	_, err = h.svc.StartSession(ctx, c, api.FuzzyFileSearchSessionStartParams{SessionID: "t", Roots: nil})
	requireCode(t, err, apperr.Unavailable, "at least one search directory is required")
	_, err = h.svc.StartSession(ctx, c, api.FuzzyFileSearchSessionStartParams{SessionID: "t", Roots: []string{h.data}})
	requireCode(t, err, apperr.Forbidden, "protected path")
	_, err = h.svc.StartSession(ctx, c, api.FuzzyFileSearchSessionStartParams{SessionID: "t", Roots: []string{h.ws}})
	require.NoError(t, err)
	_, err = h.svc.StartSession(ctx, c, api.FuzzyFileSearchSessionStartParams{SessionID: "u", Roots: []string{h.ws}})
	requireCode(t, err, apperr.Invalid, "2 fuzzy file search sessions")
	_, err = h.svc.StartSession(ctx, c, api.FuzzyFileSearchSessionStartParams{SessionID: "t", Roots: []string{h.ws}})
	require.NoError(t, err, "a session of the same id replaces the old one")

	h.svc.StopSession(c, api.FuzzyFileSearchSessionStopParams{SessionID: "s"})
	_, err = h.svc.UpdateSession(c, api.FuzzyFileSearchSessionUpdateParams{SessionID: "s", Query: "x"})
	requireCode(t, err, apperr.Invalid, "not found")
	apply() // too late: the session is gone
	rec.none(t, 100*time.Millisecond)
	h.svc.StopSession(c, api.FuzzyFileSearchSessionStopParams{SessionID: "unknown"})

	h.svc.CloseConn(1)
	h.svc.searches.mu.Lock()
	require.Empty(t, h.svc.searches.sessions)
	h.svc.searches.mu.Unlock()
}

// A query of no words matches everything, the root itself (an empty
// path) included, with score 0 and no indices, as the reference answers.
func TestSearchWithoutWords(t *testing.T) {
	h := newHost(t, Config{})
	writeTree(t, h.ws, "b.go", "a/c.go")
	res, err := h.svc.Search(context.Background(), h.conn(1, h.operator, newRecorder()), api.FuzzyFileSearchParams{Query: "   ", Roots: []string{h.ws}})
	require.NoError(t, err)
	require.Equal(t, []string{"", "a", "a/c.go", "b.go", "main.go"}, paths(res.Files))
	require.JSONEq(t, `{"root":"`+h.ws+`","path":"","match_type":"directory","file_name":"","score":0,"indices":[]}`, mustJSON(t, res.Files[0]))
}
