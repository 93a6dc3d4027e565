package server_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/server"
)

// pingClient dials url and reads until the connection ends (done gets
// the error); it answers the first answered pings and no more.
func pingClient(t *testing.T, url string, answered int32) (pings *atomic.Int32, done <-chan error) {
	t.Helper()
	pings = new(atomic.Int32)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		OnPingReceived: func(context.Context, []byte) bool { return pings.Add(1) <= answered },
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.CloseNow() })
	errc := make(chan error, 1)
	go func() {
		for {
			if _, _, err := ws.Read(context.Background()); err != nil {
				errc <- err
				return
			}
		}
	}()
	return pings, errc
}

// Every websocket session pings its peer: one that answers stays
// connected, one that stops answering is closed once a pong is late, on
// the network listener and on the control socket alike.
func TestPings(t *testing.T) {
	for _, door := range []string{"network", "control socket"} {
		t.Run(door, func(t *testing.T) {
			metrics := server.NewMetrics(prometheus.NewRegistry())
			srv, err := server.New(server.Config{Metrics: metrics, PingInterval: 20 * time.Millisecond, PongTimeout: time.Second})
			require.NoError(t, err)
			h := srv.Handler()
			if door == "control socket" {
				h = srv.LocalHandler()
			}
			hs := httptest.NewServer(h)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				require.NoError(t, srv.CloseConnections(ctx))
				hs.Close()
			})
			url := "ws" + strings.TrimPrefix(hs.URL, "http")

			pings, done := pingClient(t, url, 1<<30)
			require.Eventually(t, func() bool { return pings.Load() >= 5 }, 10*time.Second, 5*time.Millisecond)
			select {
			case err := <-done:
				t.Fatalf("a peer that answers was disconnected: %v", err)
			default:
			}

			start := time.Now()
			silentPings, silentDone := pingClient(t, url, 2)
			select {
			case <-silentDone:
			case <-time.After(10 * time.Second):
				t.Fatal("a peer that stopped answering pings is still connected")
			}
			require.GreaterOrEqual(t, silentPings.Load(), int32(3), "it answered two pings")
			require.GreaterOrEqual(t, time.Since(start), time.Second, "closed only once a pong was late")
			require.Equal(t, float64(1), testutil.ToFloat64(metrics.PingTimeouts))
			require.Eventually(t, func() bool { return testutil.ToFloat64(metrics.OpenConnections) == 1 }, 5*time.Second, 5*time.Millisecond,
				"the silent peer's session ended, the other one's did not")
		})
	}
}
