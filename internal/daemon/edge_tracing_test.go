package daemon

import (
	"context"
	"encoding/json"
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
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/frontdoor"
	"github.com/appserver/appserver/internal/httpapi"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/logtest"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/model/fakemodel"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/reqlog"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/store/memory"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/turns"
)

// edge is a front door and JSON-RPC server traced through a span
// recorder, with a mount at /v1 answering 204 on /v1/things/{id}.
func edge(t *testing.T) (*httptest.Server, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := newTracesOf(tp)
	srv, err := server.New(server.Config{Tracer: tr.Sessions()})
	require.NoError(t, err)
	things := chi.NewRouter()
	things.Get("/things/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	fd, err := frontdoor.New(frontdoor.Config{
		Tracing: tr.HTTP(), Upgrade: srv.Handler(),
		Mounts: []frontdoor.Mount{{Pattern: "/v1", Handler: things}},
	})
	require.NoError(t, err)
	hs := httptest.NewServer(fd.Handler())
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, srv.CloseConnections(ctx))
	})
	return hs, rec
}

func ended(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	return attrMap(s.Attributes())
}

// An HTTP request's server span continues the caller's traceparent, is
// named by its method and route pattern, and records neither the query
// nor the credentials.
func TestHTTPServerSpans(t *testing.T) {
	hs, rec := edge(t)
	req, err := http.NewRequest(http.MethodGet, hs.URL+"/v1/things/th-1?token=sekrit", nil)
	require.NoError(t, err)
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	req.Header.Set("X-Request-Id", "r-1")
	req.Header.Set("Authorization", "Bearer sekrit")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	spans := ended(rec, "GET /v1/things/{id}")
	require.Len(t, spans, 1)
	s := spans[0]
	require.Equal(t, trace.SpanKindServer, s.SpanKind())
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", s.SpanContext().TraceID().String())
	require.Equal(t, "00f067aa0ba902b7", s.Parent().SpanID().String())
	a := attrs(s)
	require.Equal(t, "/v1/things/{id}", a["http.route"].AsString())
	require.Equal(t, "r-1", a[requestIDAttr].AsString())
	require.Equal(t, int64(204), a["http.response.status_code"].AsInt64())
	for k, v := range a {
		require.NotContains(t, v.Emit(), "sekrit", "%s", k)
	}

	// Without a traceparent the span is a root.
	resp, err = http.Get(hs.URL + "/v1/things/th-2")
	require.NoError(t, err)
	resp.Body.Close()
	spans = ended(rec, "GET /v1/things/{id}")
	require.Len(t, spans, 2)
	require.False(t, spans[1].Parent().IsValid())
}

// wsCall sends a request (id set) or a notification and, for a request,
// reads its answer.
func wsCall(t *testing.T, ws *websocket.Conn, id any, method string) map[string]json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg := map[string]any{"method": method, "params": map[string]any{"clientInfo": map[string]any{"name": "t", "version": "1"}}}
	if id != nil {
		msg["id"] = id
	}
	b, err := json.Marshal(msg)
	require.NoError(t, err)
	require.NoError(t, ws.Write(ctx, websocket.MessageText, b))
	if id == nil {
		return nil
	}
	_, data, err := ws.Read(ctx)
	require.NoError(t, err)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &m))
	return m
}

// A session's requests get a span each, named by the method, with the
// JSON-RPC id and error code; notifications none. With a traceparent on
// the upgrade they are children of its span; without one each is a root
// linked to it.
func TestSessionSpans(t *testing.T) {
	for _, tc := range []struct {
		name        string
		traceparent string
	}{{"with traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, {"without", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			hs, rec := edge(t)
			hdr := http.Header{}
			if tc.traceparent != "" {
				hdr.Set("Traceparent", tc.traceparent)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), &websocket.DialOptions{HTTPHeader: hdr})
			require.NoError(t, err)
			defer ws.CloseNow()
			require.Contains(t, wsCall(t, ws, 0, "thread/list"), "error", "refused before initialize")
			require.Contains(t, wsCall(t, ws, 1, "initialize"), "result")
			wsCall(t, ws, nil, "initialized")
			require.Contains(t, wsCall(t, ws, "two", "no/such/method"), "error")

			// The upgrade's span ends when its handler returns, which races
			// with the session's first answers.
			require.Eventually(t, func() bool { return len(ended(rec, "GET /*")) == 1 }, 5*time.Second, time.Millisecond)
			upgrade := ended(rec, "GET /*")[0]
			require.Equal(t, int64(101), attrs(upgrade)["http.response.status_code"].AsInt64())
			require.Eventually(t, func() bool { return len(ended(rec, "no/such/method")) == 1 }, 5*time.Second, time.Millisecond)
			require.Empty(t, ended(rec, "initialized"), "no span for a notification")
			init, unknown := ended(rec, "initialize")[0], ended(rec, "no/such/method")[0]
			for _, s := range []sdktrace.ReadOnlySpan{init, unknown} {
				require.Equal(t, trace.SpanKindServer, s.SpanKind())
				require.Equal(t, "jsonrpc", attrs(s)["rpc.system.name"].AsString())
				require.Equal(t, s.Name(), attrs(s)["rpc.method"].AsString())
				if tc.traceparent != "" {
					require.Equal(t, upgrade.SpanContext().TraceID(), s.SpanContext().TraceID())
					require.Equal(t, upgrade.SpanContext().SpanID(), s.Parent().SpanID())
					require.Empty(t, s.Links())
				} else {
					require.False(t, s.Parent().IsValid(), "a root")
					require.NotEqual(t, upgrade.SpanContext().TraceID(), s.SpanContext().TraceID())
					require.Len(t, s.Links(), 1)
					require.Equal(t, upgrade.SpanContext().SpanID(), s.Links()[0].SpanContext.SpanID())
				}
			}
			require.Equal(t, "1", attrs(init)["jsonrpc.request.id"].AsString())
			require.NotContains(t, attrs(init), attribute.Key("rpc.response.status_code"))
			require.Equal(t, "two", attrs(unknown)["jsonrpc.request.id"].AsString())
			require.Equal(t, "-32601", attrs(unknown)["rpc.response.status_code"].AsString())
			require.Equal(t, "-32601", attrs(unknown)["error.type"].AsString())
			require.Equal(t, "Error", unknown.Status().Code.String())
			refused := ended(rec, "thread/list")
			require.Len(t, refused, 1)
			require.Equal(t, "-32600", attrs(refused[0])["rpc.response.status_code"].AsString())
		})
	}
}

// A turn posted over the HTTP API with a caller's traceparent and request
// id: the spans an in-process exporter captures form one tree in the
// caller's trace (HTTP request → turn → model request, whose HTTP request
// carries the model span's traceparent), and the request id is in the
// answer, in a problem, in the access log line and in the turn's lines.
func TestHTTPTurnTrace(t *testing.T) {
	ctx := context.Background()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(ctx) })
	tr := newTracesOf(tp)
	var logs logtest.Buffer
	log := slog.New(reqlog.NewHandler(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))

	script, err := fakemodel.ParseScript([]byte(`{"steps":[{"text":"hi"}]}`))
	require.NoError(t, err)
	fake, err := fakemodel.Start(script)
	require.NoError(t, err)
	t.Cleanup(fake.Close)
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "a.db"), Migrate: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	client, err := model.New(model.ProviderConfig{ID: "fake", BaseURL: fake.URL(), MaxRetries: -1}, log, model.WithPropagation(tr.Propagate()))
	require.NoError(t, err)
	hb := hub.New(hub.Config{})
	t.Cleanup(hb.Close)
	m, err := turns.New(turns.Config{
		Store: st, Sink: hb, Ephemeral: memory.New(memory.Config{}), Models: fakeModels{client},
		Observer: turnsObserver(newTelemetry(prometheus.NewRegistry(), "v"), tr),
		Defaults: turns.Defaults{Model: "fake-model", ModelProvider: "fake", Cwd: t.TempDir()},
		Tools: func(turns.ToolContext) ([]registry.ConfiguredToolSpec, *registry.Registry, error) {
			specs, reg := registry.NewBuilder(registry.Config{}).Build()
			return specs, reg, nil
		},
		Logger: log,
	})
	require.NoError(t, err)
	rules, err := principal.New(principal.Config{WorkspacesDir: t.TempDir()})
	require.NoError(t, err)
	drain := new(frontdoor.Drain)
	a, err := httpapi.New(httpapi.Config{Threads: m, Hub: hb, Keys: st, Principals: rules, Draining: drain.Draining, Logger: log})
	require.NoError(t, err)
	require.NoError(t, a.Start(ctx))
	fd, err := frontdoor.New(frontdoor.Config{
		Drain: drain, Tracing: tr.HTTP(), Logger: log,
		Upgrade: http.NotFoundHandler(), Mounts: []frontdoor.Mount{{Pattern: "/v1", Handler: a.Handler()}},
	})
	require.NoError(t, err)
	hs := httptest.NewServer(fd.Handler())
	t.Cleanup(func() {
		m.Stop()
		a.Stop()
		hs.Close()
		http.DefaultClient.CloseIdleConnections()
	})

	post := func(path, body string, hdr map[string]string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, hs.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}
	resp, body := post("/v1/threads", `{}`, nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	var th api.HTTPThread
	require.NoError(t, json.Unmarshal(body, &th))

	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	resp, body = post("/v1/threads/"+th.Thread.ID+"/turns?wait=true", `{"input":[{"type":"text","text":"hello"}]}`, map[string]string{
		"Traceparent": "00-" + callerTrace + "-" + callerSpan + "-01", "X-Request-Id": "ci-job-42",
	})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "ci-job-42", resp.Header.Get("X-Request-Id"))
	var turn api.HTTPTurn
	require.NoError(t, json.Unmarshal(body, &turn))
	require.Equal(t, api.TurnCompleted, turn.Status)
	turnBytes := len(body)

	// The turn's span ends just after the turn's end is sent.
	byName := map[string]tracetest.SpanStub{}
	require.Eventually(t, func() bool {
		for _, s := range spans.GetSpans() {
			byName[s.Name] = s
		}
		_, ok := byName["turn"]
		return ok
	}, 5*time.Second, time.Millisecond)
	server, ok := byName["POST /v1/threads/{threadID}/turns"]
	require.True(t, ok, "spans: %v", byName)
	require.Equal(t, trace.SpanKindServer, server.SpanKind)
	require.Equal(t, callerTrace, server.SpanContext.TraceID().String())
	require.Equal(t, callerSpan, server.Parent.SpanID().String())
	require.Equal(t, "ci-job-42", attrMap(server.Attributes)[requestIDAttr].AsString())
	turnSpan := byName["turn"]
	require.Equal(t, callerTrace, turnSpan.SpanContext.TraceID().String())
	require.Equal(t, server.SpanContext.SpanID(), turnSpan.Parent.SpanID(), "the turn is a child of the request")
	require.Equal(t, turn.ID, attrMap(turnSpan.Attributes)["appserver.turn.id"].AsString())
	chat, ok := byName["chat fake-model"]
	require.True(t, ok)
	require.Equal(t, callerTrace, chat.SpanContext.TraceID().String())
	require.Equal(t, turnSpan.SpanContext.SpanID(), chat.Parent.SpanID(), "the model request is a child of the turn")
	sent := fake.Requests()
	require.Len(t, sent, 1)
	require.Equal(t, "00-"+callerTrace+"-"+chat.SpanContext.SpanID().String()+"-01", sent[0].Header.Get("Traceparent"))

	// A problem names its request.
	resp, body = post("/v1/threads/nope/turns", `{"input":[]}`, map[string]string{"X-Request-Id": "ci-job-43"})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	var p api.Problem
	require.NoError(t, json.Unmarshal(body, &p))
	require.Equal(t, "ci-job-43", p.RequestID)

	// The access lines, and the turn's work, carry the request ids.
	access := map[any]map[string]any{}
	for _, rec := range logs.Records(t, frontdoor.AccessLogMsg) {
		access[rec[reqlog.Key]] = rec
	}
	line := access["ci-job-42"]
	require.NotNil(t, line, logs.String())
	require.Equal(t, "INFO", line["level"])
	require.Equal(t, "POST", line["method"])
	require.Equal(t, "/v1/threads/{threadID}/turns", line["route"])
	require.Equal(t, 200.0, line["status"])
	require.Equal(t, float64(turnBytes), line["bytes"])
	require.Equal(t, principal.OperatorLogName, line["principal"])
	require.Equal(t, 404.0, access["ci-job-43"]["status"])
	for _, msg := range []string{"turn started", "responses request"} {
		recs := logs.Records(t, msg)
		require.Len(t, recs, 1, msg)
		require.Equal(t, "ci-job-42", recs[0][reqlog.Key], msg)
	}
}
