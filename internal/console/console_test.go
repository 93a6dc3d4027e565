package console_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/console"
)

func serve(t *testing.T, method, path string, header http.Header) (*http.Response, string) {
	t.Helper()
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, "next")
	})
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	console.Handler(next).ServeHTTP(rec, req)
	resp := rec.Result()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func TestServesThePageAndItsAssets(t *testing.T) {
	resp, body := serve(t, http.MethodGet, "/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, body, `<script type="module" src="/console/app.js">`)
	csp := resp.Header.Get("Content-Security-Policy")
	require.Contains(t, csp, "default-src 'none'")
	require.Contains(t, csp, "connect-src 'self';")
	require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))

	resp, body = serve(t, http.MethodGet, "/console/app.js", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"))
	require.NotEmpty(t, body)
	resp, _ = serve(t, http.MethodHead, "/console/app.css", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/css; charset=utf-8", resp.Header.Get("Content-Type"))

	resp, _ = serve(t, http.MethodGet, "/console/missing.js", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// Everything that is not a plain GET or HEAD of the console's paths goes
// on: the websocket upgrade at "/" above all.
func TestHandsEverythingElseOn(t *testing.T) {
	upgrade := http.Header{"Connection": {"keep-alive, Upgrade"}, "Upgrade": {"websocket"}}
	for _, tc := range []struct {
		method, path string
		header       http.Header
	}{
		{http.MethodGet, "/", upgrade},
		{http.MethodPost, "/", nil},
		{http.MethodGet, "/rpc", nil},
		{http.MethodGet, "/console/", nil},
		{http.MethodGet, "/console/sub/app.js", nil},
		{http.MethodGet, "/console/.hidden", nil},
		{http.MethodGet, "/console/../go.mod", nil},
	} {
		resp, body := serve(t, tc.method, tc.path, tc.header)
		require.Equal(t, http.StatusTeapot, resp.StatusCode, "%s %s", tc.method, tc.path)
		require.Equal(t, "next", body)
	}
}

// The page loads nothing from elsewhere: every URL in it is the console's
// own, and no asset names another host.
func TestNoExternalRequests(t *testing.T) {
	root := os.DirFS("assets")
	names, err := fs.Glob(root, "*")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"app.css", "app.js", "index.html"}, names)
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	for _, name := range names {
		b, err := fs.ReadFile(root, name)
		require.NoError(t, err)
		require.Empty(t, external.FindAllString(string(b), -1), name)
	}
	html, err := fs.ReadFile(root, "index.html")
	require.NoError(t, err)
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"#]+)"`).FindAllStringSubmatch(string(html), -1) {
		require.True(t, strings.HasPrefix(m[1], "/console/"), m[1])
	}
}
