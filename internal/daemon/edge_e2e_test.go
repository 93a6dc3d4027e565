package daemon_test

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/frontdoor"
	"github.com/appserver/appserver/internal/logtest"
	"github.com/appserver/appserver/internal/principal"
)

// spanCollector is an OTLP/HTTP trace collector in the test process: it
// keeps every span the daemon exports.
type spanCollector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func startCollector(t *testing.T) (*spanCollector, string) {
	t.Helper()
	c := &spanCollector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				c.spans = append(c.spans, ss.GetSpans()...)
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL + "/v1/traces"
}

// inTrace returns the spans of the trace, by name (the last of a name).
func (c *spanCollector) inTrace(traceID string) map[string]*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]*tracepb.Span{}
	for _, s := range c.spans {
		if hex.EncodeToString(s.GetTraceId()) == traceID {
			out[s.GetName()] = s
		}
	}
	return out
}

func spanID(s *tracepb.Span) string   { return hex.EncodeToString(s.GetSpanId()) }
func parentID(s *tracepb.Span) string { return hex.EncodeToString(s.GetParentSpanId()) }

func spanAttr(s *tracepb.Span, key string) any {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			v := kv.GetValue()
			switch {
			case v.GetStringValue() != "":
				return v.GetStringValue()
			default:
				return v.GetIntValue()
			}
		}
	}
	return nil
}

// TestHTTPEdgeObservable follows one turn posted over HTTP and one started
// over a websocket through the daemon's log and traces: each request has
// an access log line and a request id (the caller's, in the answer, a
// problem and the turn's log lines); with traces exported, a caller's
// traceparent makes the request's span, the turn's and the model
// request's one trace, which the model provider's request continues.
func TestHTTPEdgeObservable(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[{"text":"hi"}]}`)
	spans, endpoint := startCollector(t)
	var logs logtest.Buffer
	d := apptest.StartWith(t, apptest.Options{Stderr: &logs}, append(apptest.FakeArgs(fake, "responses"),
		"--data-dir", t.TempDir(), "--log-format", "json", "--log-level", "debug",
		"-c", `otel.exporter="otlp-http"`, "-c", `otel.endpoint="`+endpoint+`"`)...)

	// Over HTTP: a turn posted with the caller's request id and trace.
	const httpTrace, httpParent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	post := func(path, body string, hdr map[string]string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, d.URL(path), strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := post("/v1/threads", `{}`, nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var th api.HTTPThread
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&th))
	resp = post("/v1/threads/"+th.Thread.ID+"/turns?wait=true", `{"input":[{"type":"text","text":"hello"}]}`, map[string]string{
		"X-Request-Id": "ci-job-42", "Traceparent": "00-" + httpTrace + "-" + httpParent + "-01",
	})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ci-job-42", resp.Header.Get("X-Request-Id"))
	var turn api.HTTPTurn
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&turn))
	require.Equal(t, api.TurnCompleted, turn.Status)

	// A problem names the request; an unsafe id is replaced.
	resp = post("/v1/threads/nope/turns", `{"input":[]}`, map[string]string{"X-Request-Id": "bad id"})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	var p api.Problem
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	require.NotEmpty(t, p.RequestID)
	require.NotEqual(t, "bad id", p.RequestID)
	require.Equal(t, resp.Header.Get("X-Request-Id"), p.RequestID)

	// Over the websocket: the upgrade carries another trace; turn/start's
	// span continues it.
	const wsTrace, wsParent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	// The upgrade's query carries a credential, which no line may log.
	resp = post("/v1/auth/ticket", `{}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var ticket struct{ Ticket string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&ticket))
	require.NotEmpty(t, ticket.Ticket)
	r, _, err := apptest.DialWith(t, d.Addr+"/?ticket="+ticket.Ticket, &websocket.DialOptions{HTTPHeader: http.Header{
		"Traceparent": {"00-" + wsTrace + "-" + wsParent + "-01"}, "X-Request-Id": {"ws-session-1"},
	}})
	require.NoError(t, err)
	r.Call("initialize", map[string]any{"clientInfo": map[string]any{"name": "ci", "version": "1"}})
	threadID := apptest.StartThread(t, r, nil)
	var started struct {
		Turn struct{ ID string } `json:"turn"`
	}
	require.NoError(t, json.Unmarshal(r.Call("turn/start", map[string]any{
		"threadId": threadID, "input": []any{map[string]any{"type": "text", "text": "hello"}},
	}), &started))
	r.Until("turn/completed")
	require.NoError(t, r.WS.Close(websocket.StatusNormalClosure, ""))

	// The model saw both traces.
	seen := map[string]string{}
	for _, req := range fake.Requests() {
		tp := strings.Split(req.Header.Get("Traceparent"), "-")
		require.Len(t, tp, 4, "every model request carries a traceparent")
		seen[tp[1]] = tp[2]
	}
	require.Contains(t, seen, httpTrace)
	require.Contains(t, seen, wsTrace)

	d.Stop(t) // the last spans are exported at shutdown

	// HTTP request → turn → model request, in the caller's trace.
	got := spans.inTrace(httpTrace)
	server := got["POST /v1/threads/{threadID}/turns"]
	require.NotNil(t, server, "spans: %v", got)
	require.Equal(t, httpParent, parentID(server))
	require.Equal(t, tracepb.Span_SPAN_KIND_SERVER, server.GetKind())
	require.Equal(t, "/v1/threads/{threadID}/turns", spanAttr(server, "http.route"))
	require.Equal(t, "ci-job-42", spanAttr(server, "appserver.request.id"))
	require.Equal(t, int64(200), spanAttr(server, "http.response.status_code"))
	turnSpan := got["turn"]
	require.NotNil(t, turnSpan)
	require.Equal(t, spanID(server), parentID(turnSpan))
	require.Equal(t, turn.ID, spanAttr(turnSpan, "appserver.turn.id"))
	chat := got["chat fake-model"]
	require.NotNil(t, chat)
	require.Equal(t, spanID(turnSpan), parentID(chat))
	require.Equal(t, spanID(chat), seen[httpTrace], "the model request went out under its span")

	// Websocket upgrade → turn/start → turn → model request.
	got = spans.inTrace(wsTrace)
	upgrade := got["GET /*"]
	require.NotNil(t, upgrade, "spans: %v", got)
	require.Equal(t, wsParent, parentID(upgrade))
	require.Equal(t, int64(101), spanAttr(upgrade, "http.response.status_code"))
	start := got["turn/start"]
	require.NotNil(t, start)
	require.Equal(t, spanID(upgrade), parentID(start))
	require.Equal(t, tracepb.Span_SPAN_KIND_SERVER, start.GetKind())
	require.Equal(t, "jsonrpc", spanAttr(start, "rpc.system.name"))
	require.Equal(t, "turn/start", spanAttr(start, "rpc.method"))
	require.Equal(t, "3", spanAttr(start, "jsonrpc.request.id"))
	require.Equal(t, "ws-session-1", spanAttr(start, "appserver.request.id"))
	require.NotNil(t, got["initialize"])
	require.NotNil(t, got["thread/start"])
	wsTurn := got["turn"]
	require.NotNil(t, wsTurn)
	require.Equal(t, spanID(start), parentID(wsTurn))
	require.Equal(t, started.Turn.ID, spanAttr(wsTurn, "appserver.turn.id"))
	wsChat := got["chat fake-model"]
	require.NotNil(t, wsChat)
	require.Equal(t, spanID(wsTurn), parentID(wsChat))
	require.Equal(t, spanID(wsChat), seen[wsTrace])

	// The log: an access line per request, at info, with the route and
	// never the query; the turn's lines with the request's id.
	access := logs.Records(t, frontdoor.AccessLogMsg)
	byID := map[string]map[string]any{}
	for _, rec := range access {
		byID[rec["request_id"].(string)] = rec
	}
	line := byID["ci-job-42"]
	require.NotNil(t, line, "access log: %v", access)
	require.Equal(t, "INFO", line["level"])
	require.Equal(t, "POST", line["method"])
	require.Equal(t, "/v1/threads/{threadID}/turns", line["route"])
	require.Equal(t, 200.0, line["status"])
	require.Positive(t, line["bytes"])
	require.Equal(t, principal.OperatorLogName, line["principal"])
	require.Contains(t, line["remote"], "127.0.0.1:")
	_, err = time.ParseDuration(line["duration"].(string))
	require.NoError(t, err)
	require.Equal(t, 404.0, byID[p.RequestID]["status"])
	require.Equal(t, 101.0, byID["ws-session-1"]["status"])
	require.Equal(t, "/*", byID["ws-session-1"]["route"])
	require.Equal(t, principal.OperatorLogName, byID["ws-session-1"]["principal"], "the upgrade names who opened the session")
	require.NotContains(t, logs.String(), ticket.Ticket)
	require.NotContains(t, logs.String(), "wait=true")

	for _, msg := range []string{"turn started", "responses request"} {
		ids := map[any]bool{}
		for _, rec := range logs.Records(t, msg) {
			ids[rec["request_id"]] = true
		}
		require.True(t, ids["ci-job-42"], "%s: %v", msg, ids)
		require.True(t, ids["ws-session-1"], "%s: %v", msg, ids)
	}
}
