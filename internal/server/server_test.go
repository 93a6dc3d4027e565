package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/server"
)

// The package runs end-to-end tests too (*_e2e_test.go), with the
// harness's TestMain.
func TestMain(m *testing.M) { apptest.Main(m) }

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

// errorOf requires f to be an error response and returns its code and
// message.
func errorOf(t *testing.T, f apptest.Frame) (int, string) {
	t.Helper()
	require.NotNil(t, f.Error, "expected an error, got %s", f.Raw)
	return f.Error.Code, f.Error.Message
}

func TestHandshakeOrderAndErrors(t *testing.T) {
	ts := newTestServer(t, server.Config{Info: server.Info{Home: "/data", Version: "1.2.3"}})
	c := apptest.MustDial(t, ts.url, nil)

	code, msg := c.CallError("account/read", map[string]any{})
	require.Equal(t, -32600, code)
	require.Equal(t, "Not initialized", msg)

	// Client notifications before initialize are ignored, not answered.
	c.Send(map[string]any{"method": "initialized"})

	code, msg = c.CallError("initialize", map[string]any{})
	require.Equal(t, -32600, code)
	require.Equal(t, "Invalid request: missing field `clientInfo`", msg)
	code, msg = c.CallError("initialize", nil)
	require.Equal(t, "Invalid request: missing field `params`", msg)
	code, msg = c.CallError("initialize", map[string]any{"clientInfo": map[string]any{"name": "x"}})
	require.Equal(t, "Invalid request: missing field `version`", msg)
	code, msg = c.CallError("initialize", map[string]any{"clientInfo": map[string]any{"name": "bad\nname", "version": "1"}})
	require.Equal(t, -32600, code)
	require.Equal(t, "Invalid clientInfo.name: 'bad\nname'. Must be a valid HTTP header value.", msg)

	// A failed initialize leaves the connection uninitialized: retry works.
	resp := c.CallRaw("initialize", map[string]any{"clientInfo": map[string]any{"name": "codex-tui", "title": nil, "version": "0.169.0"}})
	var res api.InitializeResult
	require.NoError(t, json.Unmarshal(resp.Result, &res))
	require.Equal(t, "/data", res.CodexHome)
	require.Equal(t, "unix", res.PlatformFamily)
	require.Contains(t, res.UserAgent, "appserver/1.2.3")
	require.Contains(t, res.UserAgent, "(codex-tui; 0.169.0)")

	code, msg = c.CallError("initialize", map[string]any{"clientInfo": map[string]any{"name": "x", "version": "1"}})
	require.Equal(t, -32600, code)
	require.Equal(t, "Already initialized", msg)

	// initialized is optional: requests are served without it.
	c.Call("account/read", map[string]any{})
}

func TestRequestIDsEchoedExactly(t *testing.T) {
	ts := newTestServer(t, server.Config{})
	c := apptest.MustDial(t, ts.url, nil)
	c.Initialize(nil)
	for _, id := range []string{`0`, `-0`, `1`, `-5`, `-9223372036854775808`, `9223372036854775807`, `"abc"`, `"n:-5"`, `"s:x"`, `"0194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a"`, `""`} {
		c.SendRaw(`{"id":` + id + `,"method":"account/read","params":{}}`)
		resp := c.Response()
		require.Equal(t, id, string(resp.ID), "id %s", id)
		require.Nil(t, resp.Error)
	}
	// Error replies too.
	c.SendRaw(`{"id":-0,"method":"no/such","params":{}}`)
	require.Equal(t, `-0`, string(c.Response().ID))
	// The jsonrpc member is accepted and ignored on input.
	c.SendRaw(`{"jsonrpc":"2.0","id":42,"method":"account/read","params":{}}`)
	require.JSONEq(t, `42`, string(c.Response().ID))
}

// A result the server cannot encode is answered with an internal error,
// not left unanswered.
func TestUnencodableResultIsAnInternalError(t *testing.T) {
	ts := newTestServer(t, server.Config{})
	ts.srv.Handle("test/bad", func(context.Context, *server.Call) (any, error) {
		return map[string]any{"f": func() {}}, nil
	})
	c := apptest.MustDial(t, ts.url, nil)
	c.Initialize(nil)
	code, msg := c.CallError("test/bad", map[string]any{})
	require.Equal(t, -32603, code)
	require.Equal(t, "internal error", msg)
	c.Call("account/read", map[string]any{})
}

func TestMalformedFramesAreDroppedNotFatal(t *testing.T) {
	metrics := server.NewMetrics(prometheus.NewRegistry())
	ts := newTestServer(t, server.Config{Metrics: metrics})
	c := apptest.MustDial(t, ts.url, nil)
	c.Initialize(nil)
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
		c.SendRaw(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, c.WS.Write(ctx, websocket.MessageBinary, []byte(`{"id":1,"method":"account/read","params":{}}`)))
	c.Send(map[string]any{"id": 8, "method": "account/read", "params": map[string]any{}})
	resp := c.ResponseTo("8")
	require.Nil(t, resp.Error)
	require.Equal(t, float64(len(bad)), testutil.ToFloat64(metrics.DroppedFrames.WithLabelValues("malformed")))
	require.Equal(t, float64(1), testutil.ToFloat64(metrics.DroppedFrames.WithLabelValues("binary")))
}

func TestUnknownAndUnimplementedMethods(t *testing.T) {
	ts := newTestServer(t, server.Config{})
	c := apptest.MustDial(t, ts.url, nil)
	c.Initialize(nil)
	code, msg := c.CallError("fs/readFile", map[string]any{"path": "/etc/passwd"})
	require.Equal(t, -32601, code)
	require.Equal(t, "method not found: fs/readFile", msg)
	code, msg = c.CallError("no/suchMethod", map[string]any{})
	require.Equal(t, -32601, code)
	require.Equal(t, "method not found: no/suchMethod", msg)
	// Gated methods without the capability get the gate error first.
	code, msg = c.CallError("collaborationMode/list", map[string]any{})
	require.Equal(t, -32600, code)
	require.Equal(t, "collaborationMode/list requires experimentalApi capability", msg)
	code, msg = c.CallError("account/read", nil)
	require.Equal(t, -32600, code)
	require.Equal(t, "Invalid request: missing field `params`", msg)
	// Null-params methods accept a missing params member.
	c.Call("configRequirements/read", nil)
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
	c := apptest.MustDial(t, ts.url, nil)
	c.Send(map[string]any{"id": "initialize", "method": "initialize", "params": map[string]any{
		"clientInfo":   map[string]any{"name": "codex-tui", "title": nil, "version": "0.169.0"},
		"capabilities": map[string]any{"requiredHumanApproval": true, "experimentalApi": true, "requestAttestation": false, "optOutNotificationMethods": nil},
	}})
	require.NotNil(t, c.Next().Result)
	warn := c.Next()
	require.Equal(t, "configWarning", warn.Method)
	require.Contains(t, apptest.Decode[map[string]json.RawMessage](t, warn.Raw), "emittedAtMs")
	c.Send(map[string]any{"method": "initialized"})

	acct := c.CallRaw("account/read", map[string]any{})
	require.JSONEq(t, `{"account":null,"userId":null,"requiresOpenaiAuth":false,"workspaceRouting":null}`, string(acct.Result))

	models := c.CallRaw("model/list", map[string]any{"includeHidden": true})
	var ml api.ModelListResult
	require.NoError(t, json.Unmarshal(models.Result, &ml))
	require.Len(t, ml.Data, 2)
	models = c.CallRaw("model/list", map[string]any{})
	require.NoError(t, json.Unmarshal(models.Result, &ml))
	require.Len(t, ml.Data, 1)
	require.True(t, ml.Data[0].IsDefault)
	models = c.CallRaw("model/list", map[string]any{"includeHidden": true, "limit": 1})
	require.NoError(t, json.Unmarshal(models.Result, &ml))
	require.Len(t, ml.Data, 1)
	require.NotNil(t, ml.NextCursor)
	require.Equal(t, "1", *ml.NextCursor)
	code, msg := c.CallError("model/list", map[string]any{"cursor": "bogus"})
	require.Equal(t, -32600, code)
	require.Equal(t, "invalid cursor: bogus", msg)

	c.Call("hooks/list", map[string]any{})
	c.Call("config/read", map[string]any{"includeLayers": true, "cwd": "."})
	req := c.CallRaw("configRequirements/read", nil)
	require.JSONEq(t, `{"supportsIndependentSpeedModes":true,"requirements":null}`, string(req.Result))
	c.Call("collaborationMode/list", map[string]any{})
	loaded := c.CallRaw("thread/loaded/list", map[string]any{})
	require.JSONEq(t, `{"data":[],"nextCursor":null}`, string(loaded.Result))
}

func TestOptOutNotifications(t *testing.T) {
	ts := newTestServer(t, server.Config{Info: server.Info{
		Warnings: []api.ConfigWarningNotification{{Summary: "w"}},
	}})
	opted := apptest.MustDial(t, ts.url, nil)
	opted.Initialize(map[string]any{"optOutNotificationMethods": []string{"configWarning", "no/such"}})
	plain := apptest.MustDial(t, ts.url, nil)
	plain.Initialize(nil)
	require.Equal(t, "configWarning", plain.Next().Method)

	n, err := ts.srv.NewNotification("configWarning", map[string]any{"summary": "later"})
	require.NoError(t, err)
	ts.srv.Broadcast(n)
	require.Equal(t, "configWarning", plain.Next().Method)
	// The opted-out connection's next frame is the response, not a warning.
	resp := opted.CallRaw("account/read", map[string]any{})
	require.Nil(t, resp.Error)
	require.Empty(t, opted.Seen)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err = opted.WS.Read(ctx)
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
	metrics := server.NewMetrics(prometheus.NewRegistry())
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
	c := apptest.MustDial(t, "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	c.Initialize(nil)
	for i := 0; i < 8; i++ {
		c.Send(map[string]any{"id": i, "method": "test/block", "params": map[string]any{}})
	}
	for i := 0; i < 8; i++ {
		<-started
	}
	// Bounded flood: every request beyond capacity is rejected at once.
	const flood = 50
	for i := 0; i < flood; i++ {
		c.Send(map[string]any{"id": 100 + i, "method": "account/read", "params": map[string]any{}})
	}
	for i := 0; i < flood; i++ {
		code, msg := errorOf(t, c.Response())
		require.Equal(t, -32001, code)
		require.Equal(t, "Server overloaded; retry later.", msg)
	}
	require.Equal(t, float64(flood), testutil.ToFloat64(metrics.Overloaded))
	release()
	for i := 0; i < 8; i++ {
		require.Nil(t, c.Response().Error)
	}
	// Capacity is back once the blocked requests finished.
	c.Call("account/read", map[string]any{})
}

func TestSlowConsumerIsDisconnectedOthersKeepReceiving(t *testing.T) {
	metrics := server.NewMetrics(prometheus.NewRegistry())
	ts := newTestServer(t, server.Config{OutboundQueue: 16, Metrics: metrics})
	slow := apptest.MustDial(t, ts.url, nil)
	slow.Initialize(nil)
	fast := apptest.MustDial(t, ts.url, nil)
	fast.Initialize(nil)

	payload := strings.Repeat("x", 64<<10)
	for i := 0; i < 400; i++ {
		n, err := ts.srv.NewNotification("test/big", map[string]any{"i": i, "pad": payload})
		require.NoError(t, err)
		ts.srv.Broadcast(n)
		m := fast.Next()
		var p struct{ I int }
		require.NoError(t, json.Unmarshal(m.Params, &p))
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
		_, _, readErr = slow.WS.Read(ctx)
	}
	require.NotErrorIs(t, readErr, context.DeadlineExceeded)
	// The fast client is still served.
	fast.Call("account/read", map[string]any{})
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
	c := apptest.MustDial(t, ts.url, nil)
	c.Initialize(nil)
	c.Call("test/ask", map[string]any{})
	<-ready
	go func() {
		res, err := sess.Request(context.Background(), "item/tool/call", map[string]any{"callId": "c1"}, nil)
		if err != nil {
			res = json.RawMessage(`"error: ` + err.Error() + `"`)
		}
		got <- res
	}()
	req := c.Next()
	require.Equal(t, "item/tool/call", req.Method)
	var id int64
	require.NoError(t, json.Unmarshal(req.ID, &id))
	require.GreaterOrEqual(t, id, int64(0))
	c.Send(map[string]any{"id": id, "result": map[string]any{"success": true}})
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
	c := apptest.MustDial(t, ts.url, nil)
	c.Initialize(nil)
	c.Send(map[string]any{"id": 1, "method": "test/slow", "params": map[string]any{"threadId": "t1"}})
	<-firstStarted
	c.Send(map[string]any{"id": 2, "method": "test/fast", "params": map[string]any{"threadId": "t1"}})
	// A request on another thread is not held back.
	c.Send(map[string]any{"id": 3, "method": "test/fast", "params": map[string]any{"threadId": "t2"}})
	require.JSONEq(t, `3`, string(c.Response().ID))
	close(release)
	require.JSONEq(t, `1`, string(c.Response().ID))
	require.JSONEq(t, `2`, string(c.Response().ID))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"fast", "slow", "fast"}, order)
}
