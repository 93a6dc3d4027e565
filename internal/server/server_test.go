package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/server"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/appserver/appserver/internal/sandbox.(*launcher).loop"))
}

// testServer is a real server behind a real HTTP listener.
type testServer struct {
	srv *server.Server
	hs  *httptest.Server
	url string
}

func newTestServer(t *testing.T, cfg server.Config) *testServer {
	t.Helper()
	srv, err := server.New(cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	ts := &testServer{srv: srv, hs: hs, url: "ws" + strings.TrimPrefix(hs.URL, "http")}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, srv.CloseConnections(ctx))
		hs.Close()
	})
	return ts
}

// client is a raw websocket JSON-RPC client for tests.
type client struct {
	t  *testing.T
	ws *websocket.Conn
}

func dial(t *testing.T, url string, hdr http.Header) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: hdr})
	require.NoError(t, err)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	ws.SetReadLimit(64 << 20)
	c := &client{t: t, ws: ws}
	t.Cleanup(func() { _ = ws.CloseNow() })
	return c
}

func (c *client) sendRaw(frame string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(c.t, c.ws.Write(ctx, websocket.MessageText, []byte(frame)))
}

func (c *client) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	require.NoError(c.t, err)
	c.sendRaw(string(b))
}

func (c *client) recv() map[string]json.RawMessage {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	typ, data, err := c.ws.Read(ctx)
	require.NoError(c.t, err)
	require.Equal(c.t, websocket.MessageText, typ)
	var m map[string]json.RawMessage
	require.NoError(c.t, json.Unmarshal(data, &m), string(data))
	_, hasJSONRPC := m["jsonrpc"]
	require.False(c.t, hasJSONRPC, "server must not write the jsonrpc member: %s", data)
	return m
}

// recvResponse skips notifications until a response or error arrives.
func (c *client) recvResponse() map[string]json.RawMessage {
	c.t.Helper()
	for {
		m := c.recv()
		if _, ok := m["id"]; ok {
			return m
		}
	}
}

func (c *client) call(id any, method string, params any) map[string]json.RawMessage {
	c.t.Helper()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	c.send(msg)
	return c.recvResponse()
}

func (c *client) initialize(caps map[string]any) {
	c.t.Helper()
	params := map[string]any{"clientInfo": map[string]any{"name": "test-client", "title": nil, "version": "1.0"}}
	if caps != nil {
		params["capabilities"] = caps
	}
	resp := c.call("initialize", "initialize", params)
	require.Contains(c.t, resp, "result", "%v", resp)
}

func errorOf(t *testing.T, m map[string]json.RawMessage) (int, string) {
	t.Helper()
	raw, ok := m["error"]
	require.True(t, ok, "expected an error, got %s", fmtMsg(m))
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(raw, &e))
	return e.Code, e.Message
}

func fmtMsg(m map[string]json.RawMessage) string {
	b, _ := json.Marshal(m)
	return string(b)
}

func TestHandshakeOrderAndErrors(t *testing.T) {
	ts := newTestServer(t, server.Config{Info: server.Info{Home: "/data", Version: "1.2.3"}})
	c := dial(t, ts.url, nil)

	code, msg := errorOf(t, c.call(1, "account/read", map[string]any{}))
	require.Equal(t, -32600, code)
	require.Equal(t, "Not initialized", msg)

	// Client notifications before initialize are ignored, not answered.
	c.send(map[string]any{"method": "initialized"})

	code, msg = errorOf(t, c.call(2, "initialize", map[string]any{}))
	require.Equal(t, -32600, code)
	require.Equal(t, "Invalid request: missing field `clientInfo`", msg)
	code, msg = errorOf(t, c.call(3, "initialize", nil))
	require.Equal(t, "Invalid request: missing field `params`", msg)
	code, msg = errorOf(t, c.call(4, "initialize", map[string]any{"clientInfo": map[string]any{"name": "x"}}))
	require.Equal(t, "Invalid request: missing field `version`", msg)
	code, msg = errorOf(t, c.call(5, "initialize", map[string]any{"clientInfo": map[string]any{"name": "bad\nname", "version": "1"}}))
	require.Equal(t, -32600, code)
	require.Equal(t, "Invalid clientInfo.name: 'bad\nname'. Must be a valid HTTP header value.", msg)

	// A failed initialize leaves the connection uninitialized: retry works.
	resp := c.call("initialize", "initialize", map[string]any{"clientInfo": map[string]any{"name": "codex-tui", "title": nil, "version": "0.169.0"}})
	var res api.InitializeResult
	require.NoError(t, json.Unmarshal(resp["result"], &res))
	require.Equal(t, "/data", res.CodexHome)
	require.Equal(t, "unix", res.PlatformFamily)
	require.Contains(t, res.UserAgent, "appserver/1.2.3")
	require.Contains(t, res.UserAgent, "(codex-tui; 0.169.0)")

	code, msg = errorOf(t, c.call(6, "initialize", map[string]any{"clientInfo": map[string]any{"name": "x", "version": "1"}}))
	require.Equal(t, -32600, code)
	require.Equal(t, "Already initialized", msg)

	// initialized is optional: requests are served without it.
	require.Contains(t, c.call(7, "account/read", map[string]any{}), "result")
}

func TestRequestIDsEchoedExactly(t *testing.T) {
	ts := newTestServer(t, server.Config{})
	c := dial(t, ts.url, nil)
	c.initialize(nil)
	for _, id := range []string{`0`, `-0`, `1`, `-5`, `-9223372036854775808`, `9223372036854775807`, `"abc"`, `"n:-5"`, `"s:x"`, `"0194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a"`, `""`} {
		c.sendRaw(`{"id":` + id + `,"method":"account/read","params":{}}`)
		resp := c.recvResponse()
		require.Equal(t, id, string(resp["id"]), "id %s", id)
		require.Contains(t, resp, "result")
	}
	// Error replies too.
	c.sendRaw(`{"id":-0,"method":"no/such","params":{}}`)
	require.Equal(t, `-0`, string(c.recvResponse()["id"]))
	// The jsonrpc member is accepted and ignored on input.
	c.sendRaw(`{"jsonrpc":"2.0","id":42,"method":"account/read","params":{}}`)
	require.JSONEq(t, `42`, string(c.recvResponse()["id"]))
}

// A result the server cannot encode is answered with an internal error,
// not left unanswered.
func TestUnencodableResultIsAnInternalError(t *testing.T) {
	ts := newTestServer(t, server.Config{})
	ts.srv.Handle("test/bad", func(context.Context, *server.Call) (any, error) {
		return map[string]any{"f": func() {}}, nil
	})
	c := dial(t, ts.url, nil)
	c.initialize(nil)
	code, msg := errorOf(t, c.call(1, "test/bad", map[string]any{}))
	require.Equal(t, -32603, code)
	require.Equal(t, "internal error", msg)
	require.Contains(t, c.call(2, "account/read", map[string]any{}), "result")
}

func TestMalformedFramesAreDroppedNotFatal(t *testing.T) {
	metrics := server.NewMetrics()
	ts := newTestServer(t, server.Config{Metrics: metrics})
	c := dial(t, ts.url, nil)
	c.initialize(nil)
	bad := []string{
		`not json`,
		`{"id":7}`,
		`{"id":1.5,"method":"account/read","params":{}}`,
		`{"id":null,"method":"account/read","params":{}}`,
		`{"id":1e3,"method":"account/read","params":{}}`,
		`{"id":true,"method":"account/read","params":{}}`,
		`{"id":99999999999999999999,"method":"account/read","params":{}}`,
		`[{"id":1,"method":"account/read","params":{}}]`,
		`{"method":5}`,
		`{"id":1,"result":{},"error":{"code":1,"message":"x"}}`,
		`"string"`,
		``,
	}
	for _, b := range bad {
		c.sendRaw(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, c.ws.Write(ctx, websocket.MessageBinary, []byte(`{"id":1,"method":"account/read","params":{}}`)))
	resp := c.call(8, "account/read", map[string]any{})
	require.JSONEq(t, `8`, string(resp["id"]))
	require.Contains(t, resp, "result")
	require.Equal(t, float64(len(bad)), testutil.ToFloat64(metrics.DroppedFrames.WithLabelValues("malformed")))
	require.Equal(t, float64(1), testutil.ToFloat64(metrics.DroppedFrames.WithLabelValues("binary")))
}

func TestUnknownAndUnimplementedMethods(t *testing.T) {
	ts := newTestServer(t, server.Config{})
	c := dial(t, ts.url, nil)
	c.initialize(nil)
	code, msg := errorOf(t, c.call(1, "fs/readFile", map[string]any{"path": "/etc/passwd"}))
	require.Equal(t, -32601, code)
	require.Equal(t, "method not found: fs/readFile", msg)
	code, msg = errorOf(t, c.call(2, "no/suchMethod", map[string]any{}))
	require.Equal(t, -32601, code)
	require.Equal(t, "method not found: no/suchMethod", msg)
	// Gated methods without the capability get the gate error first.
	code, msg = errorOf(t, c.call(3, "collaborationMode/list", map[string]any{}))
	require.Equal(t, -32600, code)
	require.Equal(t, "collaborationMode/list requires experimentalApi capability", msg)
	code, msg = errorOf(t, c.call(4, "account/read", nil))
	require.Equal(t, -32600, code)
	require.Equal(t, "Invalid request: missing field `params`", msg)
	// Null-params methods accept a missing params member.
	require.Contains(t, c.call(5, "configRequirements/read", nil), "result")
}

func TestStartupCallsOfTheTUI(t *testing.T) {
	def := true
	ts := newTestServer(t, server.Config{Info: server.Info{
		Home: "/data",
		Models: []api.Model{
			{ID: "m1", Model: "m1", DisplayName: "M1", IsDefault: def, DefaultReasoningEffort: "medium"},
			{ID: "m2", Model: "m2", DisplayName: "M2", Hidden: true, DefaultReasoningEffort: "medium"},
		},
		Warnings: []api.ConfigWarningNotification{{Summary: "unknown config key \"x\" (ignored)"}},
	}})
	c := dial(t, ts.url, nil)
	c.send(map[string]any{"id": "initialize", "method": "initialize", "params": map[string]any{
		"clientInfo":   map[string]any{"name": "codex-tui", "title": nil, "version": "0.169.0"},
		"capabilities": map[string]any{"requiredHumanApproval": true, "experimentalApi": true, "requestAttestation": false, "optOutNotificationMethods": nil},
	}})
	require.Contains(t, c.recv(), "result")
	warn := c.recv()
	require.JSONEq(t, `"configWarning"`, string(warn["method"]))
	require.Contains(t, warn, "emittedAtMs")
	c.send(map[string]any{"method": "initialized"})

	acct := c.call(1, "account/read", map[string]any{})
	require.JSONEq(t, `{"account":null,"userId":null,"requiresOpenaiAuth":false,"workspaceRouting":null}`, string(acct["result"]))

	models := c.call(2, "model/list", map[string]any{"includeHidden": true})
	var ml api.ModelListResult
	require.NoError(t, json.Unmarshal(models["result"], &ml))
	require.Len(t, ml.Data, 2)
	models = c.call(3, "model/list", map[string]any{})
	require.NoError(t, json.Unmarshal(models["result"], &ml))
	require.Len(t, ml.Data, 1)
	require.True(t, ml.Data[0].IsDefault)
	models = c.call(4, "model/list", map[string]any{"includeHidden": true, "limit": 1})
	require.NoError(t, json.Unmarshal(models["result"], &ml))
	require.Len(t, ml.Data, 1)
	require.NotNil(t, ml.NextCursor)
	require.Equal(t, "1", *ml.NextCursor)
	code, msg := errorOf(t, c.call(5, "model/list", map[string]any{"cursor": "bogus"}))
	require.Equal(t, -32600, code)
	require.Equal(t, "invalid cursor: bogus", msg)

	require.Contains(t, c.call(6, "hooks/list", map[string]any{}), "result")
	require.Contains(t, c.call(7, "config/read", map[string]any{"includeLayers": true, "cwd": "."}), "result")
	req := c.call(8, "configRequirements/read", nil)
	require.JSONEq(t, `{"supportsIndependentSpeedModes":true,"requirements":null}`, string(req["result"]))
	require.Contains(t, c.call(9, "collaborationMode/list", map[string]any{}), "result")
	loaded := c.call(10, "thread/loaded/list", map[string]any{})
	require.JSONEq(t, `{"data":[],"nextCursor":null}`, string(loaded["result"]))
}

func TestOptOutNotifications(t *testing.T) {
	ts := newTestServer(t, server.Config{Info: server.Info{
		Warnings: []api.ConfigWarningNotification{{Summary: "w"}},
	}})
	opted := dial(t, ts.url, nil)
	opted.initialize(map[string]any{"optOutNotificationMethods": []string{"configWarning", "no/such"}})
	plain := dial(t, ts.url, nil)
	plain.initialize(nil)
	require.JSONEq(t, `"configWarning"`, string(plain.recv()["method"]))

	n, err := ts.srv.NewNotification("configWarning", map[string]any{"summary": "later"})
	require.NoError(t, err)
	ts.srv.Broadcast(n)
	require.JSONEq(t, `"configWarning"`, string(plain.recv()["method"]))
	// The opted-out connection's next frame is the response, not a warning.
	resp := opted.call(1, "account/read", map[string]any{})
	require.Contains(t, resp, "result")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err = opted.ws.Read(ctx)
	require.Error(t, err, "opted-out connection must receive nothing more")
}

// blockingMethod registers test/block, whose calls wait until released.
func blockingMethod(srv *server.Server) (release func(), started chan struct{}) {
	gate := make(chan struct{})
	started = make(chan struct{}, 1024)
	srv.Handle("test/block", func(ctx context.Context, _ *server.Call) (any, error) {
		started <- struct{}{}
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return map[string]any{}, nil
	})
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }, started
}

func TestOverloadAnswersMinus32001(t *testing.T) {
	metrics := server.NewMetrics()
	srv, err := server.New(server.Config{IngressCapacity: 8, Metrics: metrics})
	require.NoError(t, err)
	release, started := blockingMethod(srv)
	hs := httptest.NewServer(srv.Handler())
	// Registered before dial, so it runs after the client's own cleanup
	// has closed the connection, as it does for every other test server.
	t.Cleanup(func() {
		release()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, srv.CloseConnections(ctx))
		hs.Close()
	})
	c := dial(t, "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	c.initialize(nil)
	for i := 0; i < 8; i++ {
		c.send(map[string]any{"id": i, "method": "test/block", "params": map[string]any{}})
	}
	for i := 0; i < 8; i++ {
		<-started
	}
	// Bounded flood: every request beyond capacity is rejected at once.
	const flood = 50
	for i := 0; i < flood; i++ {
		c.send(map[string]any{"id": 100 + i, "method": "account/read", "params": map[string]any{}})
	}
	for i := 0; i < flood; i++ {
		code, msg := errorOf(t, c.recvResponse())
		require.Equal(t, -32001, code)
		require.Equal(t, "Server overloaded; retry later.", msg)
	}
	require.Equal(t, float64(flood), testutil.ToFloat64(metrics.Overloaded))
	release()
	for i := 0; i < 8; i++ {
		require.Contains(t, c.recvResponse(), "result")
	}
	// Capacity is back once the blocked requests finished.
	require.Contains(t, c.call(999, "account/read", map[string]any{}), "result")
}

func TestSlowConsumerIsDisconnectedOthersKeepReceiving(t *testing.T) {
	metrics := server.NewMetrics()
	ts := newTestServer(t, server.Config{OutboundQueue: 16, Metrics: metrics})
	slow := dial(t, ts.url, nil)
	slow.initialize(nil)
	fast := dial(t, ts.url, nil)
	fast.initialize(nil)

	payload := strings.Repeat("x", 64<<10)
	for i := 0; i < 400; i++ {
		n, err := ts.srv.NewNotification("test/big", map[string]any{"i": i, "pad": payload})
		require.NoError(t, err)
		ts.srv.Broadcast(n)
		m := fast.recv()
		var p struct{ I int }
		require.NoError(t, json.Unmarshal(m["params"], &p))
		require.Equal(t, i, p.I)
		if testutil.ToFloat64(metrics.SlowConsumers) == 1 && i > 50 {
			break
		}
	}
	require.Equal(t, float64(1), testutil.ToFloat64(metrics.SlowConsumers))
	// The slow client, once it reads, finds the connection closed.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var readErr error
	for readErr == nil {
		_, _, readErr = slow.ws.Read(ctx)
	}
	require.NotErrorIs(t, readErr, context.DeadlineExceeded)
	// The fast client is still served.
	require.Contains(t, fast.call(1, "account/read", map[string]any{}), "result")
}

func TestHealthReadyAndOrigins(t *testing.T) {
	ts := newTestServer(t, server.Config{AllowedOrigins: []string{"https://app.example"}})
	get := func(path string, hdr map[string]string) (*http.Response, string) {
		req, err := http.NewRequest(http.MethodGet, ts.hs.URL+path, nil)
		require.NoError(t, err)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var sb strings.Builder
		_, _ = fmt.Fprint(&sb, "")
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		return resp, string(buf[:n])
	}
	resp, body := get("/healthz", nil)
	require.Equal(t, 200, resp.StatusCode)
	require.Empty(t, body)
	resp, _ = get("/readyz", nil)
	require.Equal(t, 200, resp.StatusCode)
	resp, body = get("/metrics", nil)
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, body, "appserver_")
	resp, body = get("/", nil)
	require.Equal(t, 400, resp.StatusCode)
	require.Equal(t, "Connection header did not include 'upgrade'\n", body)

	for _, path := range []string{"/healthz", "/readyz", "/", "/rpc"} {
		resp, body = get(path, map[string]string{"Origin": "https://evil.example"})
		require.Equal(t, 403, resp.StatusCode, path)
		require.Empty(t, body)
	}
	resp, _ = get("/healthz", map[string]string{"Origin": "https://app.example"})
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "https://app.example", resp.Header.Get("Access-Control-Allow-Origin"))

	// CORS preflight from an allowed origin.
	req, _ := http.NewRequest(http.MethodOptions, ts.hs.URL+"/v1/threads", nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	pre, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	pre.Body.Close()
	require.Equal(t, 204, pre.StatusCode)
	require.Contains(t, pre.Header.Get("Access-Control-Allow-Methods"), "POST")

	// Websockets: a disallowed origin is refused, an allowed one connects.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, wresp, err := websocket.Dial(ctx, ts.url, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
	require.Error(t, err)
	require.Equal(t, 403, wresp.StatusCode)
	c := dial(t, ts.url, http.Header{"Origin": {"https://app.example"}})
	c.initialize(nil)

	// Draining: readyz turns 503 and requests get the draining error.
	ts.srv.Drain()
	resp, _ = get("/readyz", nil)
	require.Equal(t, 503, resp.StatusCode)
	resp, _ = get("/healthz", nil)
	require.Equal(t, 200, resp.StatusCode)
	m := c.call(1, "account/read", map[string]any{})
	code, msg := errorOf(t, m)
	require.Equal(t, -32600, code)
	require.Equal(t, "Server is draining; retry after reconnecting", msg)
	require.Contains(t, string(m["error"]), `"data":{"reason":"serverShuttingDown"}`)
}

func TestServerToClientRequestsCorrelate(t *testing.T) {
	ts := newTestServer(t, server.Config{})
	got := make(chan json.RawMessage, 1)
	var sess *server.Session
	ready := make(chan struct{})
	ts.srv.Handle("test/ask", func(ctx context.Context, c *server.Call) (any, error) {
		sess = c.Session
		close(ready)
		return map[string]any{}, nil
	})
	c := dial(t, ts.url, nil)
	c.initialize(nil)
	require.Contains(t, c.call(1, "test/ask", map[string]any{}), "result")
	<-ready
	go func() {
		res, err := sess.Request(context.Background(), "item/tool/call", map[string]any{"callId": "c1"}, nil)
		if err != nil {
			res = json.RawMessage(`"error: ` + err.Error() + `"`)
		}
		got <- res
	}()
	req := c.recv()
	require.JSONEq(t, `"item/tool/call"`, string(req["method"]))
	var id int64
	require.NoError(t, json.Unmarshal(req["id"], &id))
	require.GreaterOrEqual(t, id, int64(0))
	c.send(map[string]any{"id": id, "result": map[string]any{"success": true}})
	require.JSONEq(t, `{"success":true}`, string(<-got))
}

func TestRequestsOnOneThreadKeepArrivalOrder(t *testing.T) {
	ts := newTestServer(t, server.Config{})
	var mu sync.Mutex
	var order []string
	firstStarted := make(chan struct{})
	release := make(chan struct{})
	ts.srv.Handle("test/slow", func(ctx context.Context, c *server.Call) (any, error) {
		close(firstStarted)
		<-release
		mu.Lock()
		order = append(order, "slow")
		mu.Unlock()
		return map[string]any{}, nil
	})
	ts.srv.Handle("test/fast", func(ctx context.Context, c *server.Call) (any, error) {
		mu.Lock()
		order = append(order, "fast")
		mu.Unlock()
		return map[string]any{}, nil
	})
	c := dial(t, ts.url, nil)
	c.initialize(nil)
	c.send(map[string]any{"id": 1, "method": "test/slow", "params": map[string]any{"threadId": "t1"}})
	<-firstStarted
	c.send(map[string]any{"id": 2, "method": "test/fast", "params": map[string]any{"threadId": "t1"}})
	// A request on another thread is not held back.
	c.send(map[string]any{"id": 3, "method": "test/fast", "params": map[string]any{"threadId": "t2"}})
	require.JSONEq(t, `3`, string(c.recvResponse()["id"]))
	close(release)
	require.JSONEq(t, `1`, string(c.recvResponse()["id"]))
	require.JSONEq(t, `2`, string(c.recvResponse()["id"]))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"fast", "slow", "fast"}, order)
}
