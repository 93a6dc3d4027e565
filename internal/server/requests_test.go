package server_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/server"
)

// requestOutcome is what waiting for a server→client request gave.
type requestOutcome struct {
	res json.RawMessage
	err error
}

// startServerRequest starts a server→client request on the test
// connection's session and returns its id, as the client sees it in the
// frame, and a channel with the outcome of waiting for it.
func startServerRequest(t *testing.T, ctx context.Context, ts *testServer, c *apptest.Client, params any) (string, <-chan requestOutcome) {
	t.Helper()
	sess := ts.srv.Sessions()[0]
	id, wait, err := sess.StartRequest(ctx, "item/tool/call", params)
	require.NoError(t, err)
	frame := c.Next()
	require.Equal(t, strconv.FormatInt(id, 10), string(frame.ID))
	require.Equal(t, "item/tool/call", frame.Method)
	out := make(chan requestOutcome, 1)
	go func() {
		res, err := wait(ctx)
		out <- requestOutcome{res, err}
	}()
	return string(frame.ID), out
}

func TestServerRequestsGetTheirAnswers(t *testing.T) {
	metrics := server.NewMetrics(prometheus.NewRegistry())
	ts := newTestServer(t, server.Config{Metrics: metrics})
	c := apptest.MustDial(t, ts.url, nil)
	c.Initialize(nil)
	ctx := context.Background()

	// The frame is exactly {"id","method","params"}.
	sess := ts.srv.Sessions()[0]
	id, wait, err := sess.StartRequest(ctx, "item/tool/call", map[string]any{"callId": "c<1>"})
	require.NoError(t, err)
	_, data, err := c.WS.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, `{"id":`+strconv.FormatInt(id, 10)+`,"method":"item/tool/call","params":{"callId":"c\u003c1\u003e"}}`, string(data))
	c.SendRaw(`{"id":` + strconv.FormatInt(id, 10) + `,"result": {"ok" : true}}`)
	res, err := wait(ctx)
	require.NoError(t, err)
	require.Equal(t, `{"ok" : true}`, string(res), "the result as the client wrote it")

	rid, out := startServerRequest(t, ctx, ts, c, nil)
	c.SendRaw(`{"id":` + rid + `,"result":null}`)
	got := <-out
	require.NoError(t, got.err)
	require.Equal(t, "null", string(got.res))

	rid, out = startServerRequest(t, ctx, ts, c, map[string]int{})
	// Answers that match no request, or are malformed, leave it waiting.
	c.SendRaw(`{"id":"` + rid + `","result":{}}`)
	c.SendRaw(`{"id":-1,"result":{}}`)
	c.SendRaw(`{"id":` + rid + `,"error":{"message":"no code"}}`)
	c.SendRaw(`{"id":` + rid + `5,"result":{}}`)
	// Frames are handled in order: once a later request is answered, the
	// ones above were.
	c.Call("account/read", map[string]any{})
	require.Equal(t, float64(2), testutil.ToFloat64(metrics.DroppedFrames.WithLabelValues("malformed")))
	select {
	case got := <-out:
		t.Fatalf("answered by a frame that does not answer it: %+v", got)
	default:
	}
	c.SendRaw(`{"jsonrpc":"2.0","id":` + rid + `,"error":{"code":-5,"message":"nope","data":[1]}}`)
	got = <-out
	var rpcErr *server.RPCError
	require.ErrorAs(t, got.err, &rpcErr)
	require.Equal(t, &server.RPCError{Code: -5, Message: "nope"}, rpcErr)

	// A waiter that gives up leaves the request outstanding: its late
	// answer is still taken (and dropped) without disturbing the next one.
	wctx, cancel := context.WithCancel(ctx)
	rid, out = startServerRequest(t, wctx, ts, c, nil)
	cancel()
	require.ErrorIs(t, (<-out).err, context.Canceled)
	c.SendRaw(`{"id":` + rid + `,"result":1}`)
	rid, out = startServerRequest(t, ctx, ts, c, nil)
	c.SendRaw(`{"id":` + rid + `,"result":2}`)
	require.Equal(t, "2", string((<-out).res))

	// The connection still serves the client's own requests.
	c.Call("account/read", map[string]any{})
}

func TestServerRequestsFailWhenTheConnectionCloses(t *testing.T) {
	ts := newTestServer(t, server.Config{})
	c := apptest.MustDial(t, ts.url, nil)
	c.Initialize(nil)
	sess := ts.srv.Sessions()[0]
	ctx := context.Background()
	_, out := startServerRequest(t, ctx, ts, c, nil)
	require.NoError(t, c.WS.Close(websocket.StatusNormalClosure, ""))
	select {
	case got := <-out:
		require.ErrorIs(t, got.err, server.ErrConnectionClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not released by the disconnect")
	}
	require.Eventually(t, func() bool {
		_, _, err := sess.StartRequest(ctx, "item/tool/call", nil)
		return err != nil
	}, 5*time.Second, 5*time.Millisecond)
	_, _, err := sess.StartRequest(ctx, "item/tool/call", nil)
	require.ErrorIs(t, err, server.ErrConnectionClosed)
}
