package frontdoor_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/frontdoor"
	"github.com/appserver/appserver/internal/logtest"
	"github.com/appserver/appserver/internal/reqlog"
)

func jsonLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(reqlog.NewHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})))
}

// do sends a request with the headers and returns the answer, read.
func do(t *testing.T, method, url string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

// waitRecords waits until n access log lines are written (a handler's
// line follows its answer).
func waitRecords(t *testing.T, logs *logtest.Buffer, n int) []map[string]any {
	t.Helper()
	require.Eventually(t, func() bool { return len(logs.Records(t, frontdoor.AccessLogMsg)) >= n }, 5*time.Second, time.Millisecond, logs.String())
	return logs.Records(t, frontdoor.AccessLogMsg)
}

// Every request gets an access log line at info with its method, route
// pattern, status, body bytes, duration, principal, request id and remote
// address, and nothing of its path's ids, query or headers; the probes
// are logged at debug. The request id is the client's X-Request-Id when
// safe, else a new one, answered in X-Request-Id and carried in the
// handler's context.
func TestAccessLog(t *testing.T) {
	var logs logtest.Buffer
	seen := make(chan string, 8)
	d := newDoor(t, frontdoor.Config{
		AllowedOrigins: []string{"https://app.example"},
		Logger:         jsonLogger(&logs, slog.LevelInfo),
		Mounts: []frontdoor.Mount{{Pattern: "/v1", Handler: func() http.Handler {
			r := chi.NewRouter()
			r.Post("/threads/{id}/turns", func(w http.ResponseWriter, r *http.Request) {
				reqlog.SetPrincipal(r.Context(), "alice")
				seen <- reqlog.ID(r.Context())
				w.WriteHeader(http.StatusAccepted)
				_, _ = io.WriteString(w, "twelve bytes")
			})
			return r
		}()}},
	})
	hs := httptest.NewServer(d.fd.Handler())
	t.Cleanup(hs.Close)

	resp, _ := do(t, http.MethodPost, hs.URL+"/v1/threads/th-secret-id/turns?ticket=sekrit&wait=true", map[string]string{
		"X-Request-Id": "ci-run-7", "Authorization": "Bearer tok-sekrit", "Cookie": "session=cookie-sekrit",
	})
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, "ci-run-7", resp.Header.Get("X-Request-Id"))
	require.Equal(t, "ci-run-7", <-seen, "the handler's context carries the id")

	recs := waitRecords(t, &logs, 1)
	rec := recs[0]
	require.Equal(t, "INFO", rec["level"])
	require.Equal(t, "POST", rec["method"])
	require.Equal(t, "/v1/threads/{id}/turns", rec["route"])
	require.Equal(t, 202.0, rec["status"])
	require.Equal(t, 12.0, rec["bytes"])
	require.NotEmpty(t, rec["duration"])
	require.Equal(t, "alice", rec["principal"])
	require.Equal(t, "ci-run-7", rec["request_id"])
	require.Contains(t, rec["remote"], "127.0.0.1:")
	for _, secret := range []string{"sekrit", "th-secret-id", "wait=true"} {
		require.NotContains(t, logs.String(), secret)
	}

	// No id, or one that is not safe: a new one, answered and logged.
	for i, given := range []string{"", "two words", strings.Repeat("x", reqlog.MaxLen+1), "<script>"} {
		hdr := map[string]string{}
		if given != "" {
			hdr["X-Request-Id"] = given
		}
		resp, _ = do(t, http.MethodPost, hs.URL+"/v1/threads/t/turns", hdr)
		id := resp.Header.Get("X-Request-Id")
		_, err := uuid.Parse(id)
		require.NoError(t, err, "%q was replaced by a new id, not %q", given, id)
		require.Equal(t, id, <-seen)
		recs = waitRecords(t, &logs, 2+i)
		require.Equal(t, id, recs[1+i]["request_id"])
		require.NotContains(t, logs.String(), "two words")
	}

	// Refused and unmatched requests are logged too; the upgrade, every
	// path the router has no route for, under one pattern.
	resp, _ = do(t, http.MethodGet, hs.URL+"/v1/threads", map[string]string{"Origin": "https://evil.example"})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("X-Request-Id"))
	resp, _ = do(t, http.MethodGet, hs.URL+"/some/where?token=sekrit", nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	recs = waitRecords(t, &logs, 7)
	require.Equal(t, 403.0, recs[5]["status"])
	require.Equal(t, "", recs[5]["route"], "refused before routing")
	require.Equal(t, "", recs[5]["principal"])
	require.Equal(t, "/*", recs[6]["route"])
	require.Equal(t, 400.0, recs[6]["status"])

	// A websocket upgrade: 101, logged once the connection is handed over.
	c := dial(t, "ws"+strings.TrimPrefix(hs.URL, "http")+"/?tok=sekrit", &websocket.DialOptions{HTTPHeader: http.Header{"X-Request-Id": {"ws-1"}}})
	c.initialize()
	recs = waitRecords(t, &logs, 8)
	require.Equal(t, "GET", recs[7]["method"])
	require.Equal(t, "/*", recs[7]["route"])
	require.Equal(t, 101.0, recs[7]["status"])
	require.Equal(t, "ws-1", recs[7]["request_id"])

	// Probes: at debug only.
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, _ = do(t, http.MethodGet, hs.URL+p, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NotEmpty(t, resp.Header.Get("X-Request-Id"))
	}
	resp, _ = do(t, http.MethodPost, hs.URL+"/v1/threads/t/turns", nil)
	<-seen
	recs = waitRecords(t, &logs, 9)
	require.Len(t, recs, 9, "the probes are not logged at info")
	require.Equal(t, "POST", recs[8]["method"])
	require.NotContains(t, logs.String(), "sekrit")
}

// At debug the probes are logged like any request.
func TestAccessLogProbesAtDebug(t *testing.T) {
	var logs logtest.Buffer
	d := newDoor(t, frontdoor.Config{Logger: jsonLogger(&logs, slog.LevelDebug)})
	hs := httptest.NewServer(d.fd.Handler())
	t.Cleanup(hs.Close)
	do(t, http.MethodGet, hs.URL+"/healthz", nil)
	recs := waitRecords(t, &logs, 1)
	require.Equal(t, "DEBUG", recs[0]["level"])
	require.Equal(t, "/healthz", recs[0]["route"])
	require.Equal(t, 200.0, recs[0]["status"])
}

// Tracing wraps each request of both listeners inside its request id,
// and sees the route pattern once the request is served.
func TestTracingMiddleware(t *testing.T) {
	type seen struct{ id, route string }
	got := make(chan seen, 4)
	var logs logtest.Buffer
	d := newDoor(t, frontdoor.Config{
		Logger: jsonLogger(&logs, slog.LevelInfo),
		Tracing: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				next.ServeHTTP(w, r)
				got <- seen{reqlog.ID(r.Context()), chi.RouteContext(r.Context()).RoutePattern()}
			})
		},
	})
	hs := httptest.NewServer(d.fd.Handler())
	t.Cleanup(hs.Close)
	do(t, http.MethodGet, hs.URL+"/readyz", map[string]string{"X-Request-Id": "r-1"})
	require.Equal(t, seen{"r-1", "/readyz"}, <-got)

	path := filepath.Join(shortDir(t), "app.sock")
	ln, err := frontdoor.ListenUnix(path, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.fd.Serve(ctx, ln) }()
	c := dial(t, "ws://localhost/", &websocket.DialOptions{HTTPClient: unixDialer(path), HTTPHeader: http.Header{"X-Request-Id": {"u-1"}}})
	c.initialize()
	require.Equal(t, seen{"u-1", "/*"}, <-got)
	recs := waitRecords(t, &logs, 1) // /readyz is logged at debug
	require.Equal(t, "u-1", recs[0]["request_id"])
	require.Equal(t, 101.0, recs[0]["status"])
	cancel()
	require.NoError(t, <-served)
}
