package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/turns"
)

// recordingSink records what the server hands it.
type recordingSink struct {
	mu      sync.Mutex
	frames  []string
	take    bool
	held    chan *dynamic.Pending
	settled chan dynamic.Outcome
}

func newRecordingSink(take bool) *recordingSink {
	return &recordingSink{take: take, held: make(chan *dynamic.Pending, 4), settled: make(chan dynamic.Outcome, 4)}
}

func (k *recordingSink) Notify(n *server.Notification) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.frames = append(k.frames, string(n.Frame()))
}

func (k *recordingSink) HoldToolCall(p *dynamic.Pending) bool {
	if k.take {
		k.held <- p
	}
	return k.take
}

func (k *recordingSink) ToolCallSettled(_ *dynamic.Pending, o dynamic.Outcome) { k.settled <- o }

func (k *recordingSink) got() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.frames...)
}

func TestSinksReceiveWhatIsSentToTheirID(t *testing.T) {
	ts := newTestServer(t, server.Config{})
	k := newRecordingSink(false)
	id := ts.srv.AddSink(k)
	// Ids come from the sessions' counter: a later connection is younger.
	c := dial(t, ts.url, nil)
	c.initialize(nil)
	require.Greater(t, ts.srv.Sessions()[0].ID(), uint64(id))

	n := ts.srv.Notifier()
	n.Send([]turns.ConnID{id, turns.ConnID(ts.srv.Sessions()[0].ID())}, "turn/started", map[string]string{"threadId": "t1"})
	n.Broadcast("thread/status/changed", map[string]string{"threadId": "t1"})
	frames := k.got()
	require.Len(t, frames, 1, "sinks get what is sent to them, not broadcasts")
	require.Contains(t, frames[0], `"method":"turn/started","params":{"threadId":"t1"},"emittedAtMs":`)
	require.Equal(t, `"turn/started"`, string(c.recv()["method"]), "the websocket got the same notification")

	ts.srv.RemoveSink(id)
	n.Send([]turns.ConnID{id}, "turn/completed", map[string]string{})
	require.Len(t, k.got(), 1)
}

func TestToolRouterLetsSinksHoldCalls(t *testing.T) {
	ts := newTestServer(t, server.Config{})
	taker, decliner := newRecordingSink(true), newRecordingSink(false)
	ids := []turns.ConnID{ts.srv.AddSink(taker), ts.srv.AddSink(decliner)}
	var mu sync.Mutex
	subs := ids
	broker := dynamic.NewBroker(dynamic.BrokerConfig{ReconnectTimeout: 20 * time.Millisecond})
	defer broker.Close()
	broker.SetRouter(ts.srv.NewToolRouter(func(string) []turns.ConnID {
		mu.Lock()
		defer mu.Unlock()
		return subs
	}))

	type result struct {
		r   api.DynamicToolCallResult
		err error
	}
	res := make(chan result, 1)
	go func() {
		r, err := broker.Call(context.Background(), dynamic.CallRequest{ThreadID: "t1", TurnID: "u1", CallID: "c1", Tool: "x"})
		res <- result{r, err}
	}()
	p := <-taker.held
	require.True(t, p.Resolve(api.DynamicToolCallResult{Success: true}))
	got := <-res
	require.NoError(t, got.err)
	require.True(t, got.r.Success)
	require.Equal(t, dynamic.OutcomeSuccess, <-taker.settled, "the holder hears how the call ended")
	require.Empty(t, decliner.settled)

	// With only a declining sink subscribed, nobody holds the call: it
	// waits for a connection, then times out.
	mu.Lock()
	subs = ids[1:]
	mu.Unlock()
	_, err := broker.Call(context.Background(), dynamic.CallRequest{ThreadID: "t1", TurnID: "u1", CallID: "c2", Tool: "x"})
	var ce *dynamic.CallError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, dynamic.OutcomeTimeout, ce.Outcome)
}

func TestMountedHandlerIsBehindTheOriginGuard(t *testing.T) {
	ts := newTestServer(t, server.Config{AllowedOrigins: []string{"https://app.example"}})
	ts.srv.Mount("/v1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("api:" + r.URL.Path))
	}))
	hs := httptest.NewServer(ts.srv.Handler())
	defer hs.Close()
	get := func(origin string) (int, string) {
		req, _ := http.NewRequest("GET", hs.URL+"/v1/threads", nil)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b := make([]byte, 64)
		n, _ := resp.Body.Read(b)
		return resp.StatusCode, string(b[:n])
	}
	code, body := get("")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "api:/v1/threads", body)
	code, _ = get("https://evil.example")
	require.Equal(t, http.StatusForbidden, code)
	code, _ = get("https://app.example")
	require.Equal(t, http.StatusOK, code)
	require.False(t, ts.srv.Draining())
	ts.srv.Drain()
	require.True(t, ts.srv.Draining())
}
