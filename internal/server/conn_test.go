package server_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/server"
)

// TestIdleConnectionsHoldOneGoroutine checks that an idle connection keeps
// only its reader: the upgrade handler returns and the stream's writer
// exits once its queue is empty; between pings, the pinger is a timer.
func TestIdleConnectionsHoldOneGoroutine(t *testing.T) {
	for _, interval := range []time.Duration{0, time.Hour} {
		t.Run("pings every "+interval.String(), func(t *testing.T) { idleConnections(t, interval) })
	}
}

func idleConnections(t *testing.T, pingInterval time.Duration) {
	metrics := server.NewMetrics(prometheus.NewRegistry())
	ts := newTestServer(t, server.Config{Metrics: metrics, PingInterval: pingInterval})
	warm := apptest.MustDial(t, ts.url, nil)
	warm.Initialize(nil)
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()

	const n = 20
	for i := 0; i < n; i++ {
		apptest.MustDial(t, ts.url, nil).Initialize(nil)
	}
	require.Equal(t, float64(n+1), testutil.ToFloat64(metrics.OpenConnections))
	var last int
	require.Eventually(t, func() bool {
		last = runtime.NumGoroutine() - before
		// A little slack for goroutines of the test's own HTTP client;
		// with sourcegraph/jsonrpc2's reader and watcher it was 2n, with
		// the handler goroutine and a parked writer as well 4n.
		return last <= n+5
	}, 5*time.Second, 10*time.Millisecond, "idle connections hold more than 1 goroutine each")
	t.Logf("%d goroutines for %d idle connections", last, n)
}

// TestPeerCloseTearsDownSession checks the teardown that runs when the
// peer closes the connection: the session is forgotten and the gauge drops without
// CloseConnections.
func TestPeerCloseTearsDownSession(t *testing.T) {
	metrics := server.NewMetrics(prometheus.NewRegistry())
	ts := newTestServer(t, server.Config{Metrics: metrics})
	c := apptest.MustDial(t, ts.url, nil)
	c.Initialize(nil)
	require.Len(t, ts.srv.Sessions(), 1)
	require.Equal(t, float64(1), testutil.ToFloat64(metrics.OpenConnections))

	require.NoError(t, c.WS.Close(websocket.StatusNormalClosure, ""))
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(metrics.OpenConnections) == 0 && len(ts.srv.Sessions()) == 0
	}, 5*time.Second, 5*time.Millisecond)

	// The server keeps serving new connections.
	d := apptest.MustDial(t, ts.url, nil)
	d.Initialize(nil)
	d.Call("account/read", map[string]any{})
}

// TestCloseConnectionsWaitsForTeardown checks that CloseConnections returns
// only once every connection's teardown has run.
func TestCloseConnectionsWaitsForTeardown(t *testing.T) {
	metrics := server.NewMetrics(prometheus.NewRegistry())
	ts := newTestServer(t, server.Config{Metrics: metrics})
	for i := 0; i < 5; i++ {
		c := apptest.MustDial(t, ts.url, nil)
		c.Initialize(nil)
		go func() {
			// Answer the close handshake.
			for {
				if _, _, err := c.WS.Read(context.Background()); err != nil {
					return
				}
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, ts.srv.CloseConnections(ctx))
	require.Equal(t, float64(0), testutil.ToFloat64(metrics.OpenConnections))
	require.Empty(t, ts.srv.Sessions())
}
