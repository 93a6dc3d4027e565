package frontdoor

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/appserver/appserver/internal/reqlog"
)

// AccessLogMsg is the msg of the access log's lines.
const AccessLogMsg = "http request"

// probeRoutes are logged at debug: orchestrators and scrapers ask them
// every few seconds, and a line each would bury the requests of clients.
var probeRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// edge starts every request the front door serves: it takes the request
// id from X-Request-Id when that is safe, else makes one, answers it in
// X-Request-Id, carries it in the request's context, and writes the
// request's access log line once the handler has returned (for a
// websocket upgrade, once the connection is handed over). The line names
// the route pattern (empty for a request the origin guard refused before
// it was routed), never the path or the query, which may carry
// credentials, nor any header.
func (f *FrontDoor) edge(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx, req := reqlog.Start(r.Context(), r.Header.Get(reqlog.Header))
		w.Header().Set(reqlog.Header, req.ID)
		aw := &accessWriter{ResponseWriter: w}
		next.ServeHTTP(aw, r.WithContext(ctx))
		f.logAccess(ctx, r, req, aw, time.Since(start))
	})
}

// logAccess writes the access log line of a request.
func (f *FrontDoor) logAccess(ctx context.Context, r *http.Request, req *reqlog.Request, aw *accessWriter, d time.Duration) {
	route := ""
	if rc := chi.RouteContext(ctx); rc != nil {
		route = rc.RoutePattern()
	}
	level := slog.LevelInfo
	if probeRoutes[route] {
		level = slog.LevelDebug
	}
	if !f.log.Enabled(ctx, level) {
		return
	}
	status := aw.status
	if status == 0 {
		status = http.StatusOK // what net/http answers for a handler that wrote nothing
	}
	f.log.LogAttrs(ctx, level, AccessLogMsg,
		slog.String("method", r.Method),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Int64("bytes", aw.bytes),
		slog.Duration("duration", d),
		slog.String("principal", req.Principal()),
		slog.String(reqlog.Key, req.ID),
		slog.String("remote", r.RemoteAddr),
	)
}

// accessWriter remembers the status and counts the body bytes a handler
// wrote.
type accessWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *accessWriter) WriteHeader(code int) {
	// 1xx answers are interim, but for 101 Switching Protocols, which is
	// the last a websocket upgrade answers over HTTP.
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *accessWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController and the websocket upgrade reach the
// connection (flushes, deadlines, the hijack).
func (w *accessWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
