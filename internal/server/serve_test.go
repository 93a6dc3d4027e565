package server_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/server"
)

// TestServeDrainsThenShutdownCloses checks the two halves of a shutdown
// the daemon puts its other services between: once ctx ends, Serve stops
// taking work and returns while the websockets stay open (they must still
// hear the turns end); Shutdown then closes them and the listener.
func TestServeDrainsThenShutdownCloses(t *testing.T) {
	srv, err := server.New(server.Config{})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()

	c := dial(t, "ws://"+ln.Addr().String(), nil)
	c.initialize(nil)
	require.Equal(t, http.StatusOK, getStatus(t, base+"/readyz"))

	cancel()
	require.NoError(t, <-served)
	// Draining: the open connection is still served, new work is refused.
	resp := c.call(2, "account/read", map[string]any{})
	require.Contains(t, string(resp["error"]), "draining")
	require.Equal(t, http.StatusServiceUnavailable, getStatus(t, base+"/readyz"))
	_, res, err := websocket.Dial(context.Background(), "ws://"+ln.Addr().String(), nil)
	require.Error(t, err)
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)

	closed := make(chan error, 1)
	go func() {
		for {
			if _, _, err := c.ws.Read(context.Background()); err != nil {
				closed <- err
				return
			}
		}
	}()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	require.NoError(t, srv.Shutdown(sctx))
	require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(<-closed))
	_, err = http.Get(base + "/healthz")
	require.Error(t, err, "the listener is closed")
	require.NoError(t, srv.Shutdown(sctx), "a second Shutdown is harmless")
}

// TestShutdownWithoutServe checks that a server that never served shuts
// down at once, as it does when the daemon fails before listening.
func TestShutdownWithoutServe(t *testing.T) {
	srv, err := server.New(server.Config{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
	require.True(t, srv.Draining())
}

func getStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}
