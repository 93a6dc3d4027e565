package frontdoor_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/frontdoor"
	"github.com/appserver/appserver/internal/server"
)

func TestMain(m *testing.M) {
	if helperMain() {
		return
	}
	goleak.VerifyTestMain(m)
}

// door is a front door with a real JSON-RPC server behind its upgrade.
type door struct {
	fd    *frontdoor.FrontDoor
	srv   *server.Server
	drain *frontdoor.Drain
}

func newDoor(t *testing.T, cfg frontdoor.Config) *door {
	t.Helper()
	drain := new(frontdoor.Drain)
	srv, err := server.New(server.Config{Draining: drain.Draining})
	require.NoError(t, err)
	cfg.Drain = drain
	cfg.Upgrade = srv.Handler()
	cfg.Local = srv.LocalHandler()
	fd, err := frontdoor.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, fd.Shutdown(ctx))
		require.NoError(t, srv.CloseConnections(ctx))
	})
	return &door{fd: fd, srv: srv, drain: drain}
}

// client is a websocket JSON-RPC client.
type client struct {
	t  *testing.T
	ws *websocket.Conn
}

func dial(t *testing.T, url string, opts *websocket.DialOptions) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, url, opts)
	require.NoError(t, err)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &client{t: t, ws: ws}
}

// call sends a request and returns the first message with an id.
func (c *client) call(id int, method string, params any) map[string]json.RawMessage {
	c.t.Helper()
	frame, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	require.NoError(c.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(c.t, c.ws.Write(ctx, websocket.MessageText, frame))
	for {
		_, data, err := c.ws.Read(ctx)
		require.NoError(c.t, err)
		var m map[string]json.RawMessage
		require.NoError(c.t, json.Unmarshal(data, &m))
		if _, ok := m["id"]; ok {
			return m
		}
	}
}

func (c *client) initialize() {
	c.t.Helper()
	resp := c.call(0, "initialize", map[string]any{"clientInfo": map[string]any{"name": "test", "version": "1"}})
	require.Contains(c.t, resp, "result")
}

func get(t *testing.T, url string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	return do(t, http.MethodGet, url, hdr)
}

// The network listener's router: health, readiness, metrics, the mounts
// given at construction, the websocket upgrade for every other path, all
// behind the origin guard; draining turns /readyz 503 and refuses the
// requests of open sessions.
func TestHealthReadyAndOrigins(t *testing.T) {
	d := newDoor(t, frontdoor.Config{
		AllowedOrigins: []string{"https://app.example"},
		Mounts: []frontdoor.Mount{{Pattern: "/v1", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "api "+r.URL.Path)
		})}},
	})
	hs := httptest.NewServer(d.fd.Handler())
	t.Cleanup(hs.Close)
	wsURL := "ws" + strings.TrimPrefix(hs.URL, "http")

	resp, body := get(t, hs.URL+"/healthz", nil)
	require.Equal(t, 200, resp.StatusCode)
	require.Empty(t, body)
	resp, _ = get(t, hs.URL+"/readyz", nil)
	require.Equal(t, 200, resp.StatusCode)
	resp, body = get(t, hs.URL+"/v1/threads", nil)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "api /v1/threads", body)
	resp, body = get(t, hs.URL+"/", nil)
	require.Equal(t, 400, resp.StatusCode)
	require.Equal(t, "Connection header did not include 'upgrade'\n", body)

	for _, path := range []string{"/healthz", "/readyz", "/", "/rpc", "/v1/threads", "/metrics"} {
		resp, body = get(t, hs.URL+path, map[string]string{"Origin": "https://evil.example"})
		require.Equal(t, 403, resp.StatusCode, path)
		require.Empty(t, body)
	}
	resp, _ = get(t, hs.URL+"/healthz", map[string]string{"Origin": "https://app.example"})
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "https://app.example", resp.Header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Credentials"), "an allowed page may send the session cookie")
	resp, body = get(t, hs.URL+"/metrics", nil)
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, body, "appserver_origin_rejections_total 6")
	require.Contains(t, body, "go_goroutines")

	// A page this listener served (the web console) is of the listener's
	// own origin: allowed on an IP literal or localhost, which DNS cannot
	// rebind; not on a name, nor with another scheme or port.
	own := hs.URL // http://127.0.0.1:PORT
	resp, _ = get(t, hs.URL+"/v1/threads", map[string]string{"Origin": own})
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, own, resp.Header.Get("Access-Control-Allow-Origin"))
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(hs.URL, "http://"))
	for _, tc := range []struct {
		host, origin string
		status       int
	}{
		{"localhost:" + port, "http://localhost:" + port, 200},
		{"[::1]:" + port, "http://[::1]:" + port, 200},
		{"rebound.example:" + port, "http://rebound.example:" + port, 403}, // DNS rebinding
		{"127.0.0.1:" + port, "https://127.0.0.1:" + port, 403},            // another scheme
		{"127.0.0.1:" + port, "http://127.0.0.1:1", 403},                   // another port
		{"127.0.0.1:" + port, "http://127.0.0.1", 403},
	} {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+"/v1/threads", nil)
		req.Host = tc.host
		req.Header.Set("Origin", tc.origin)
		r, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		r.Body.Close()
		require.Equal(t, tc.status, r.StatusCode, tc.origin)
	}

	// CORS preflight from an allowed origin.
	req, _ := http.NewRequest(http.MethodOptions, hs.URL+"/v1/threads", nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	pre, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	pre.Body.Close()
	require.Equal(t, 204, pre.StatusCode)
	require.Contains(t, pre.Header.Get("Access-Control-Allow-Methods"), "POST")
	require.Contains(t, pre.Header.Get("Access-Control-Allow-Methods"), "DELETE", "logging out: DELETE /v1/auth/session")
	require.Equal(t, "true", pre.Header.Get("Access-Control-Allow-Credentials"))

	// Websockets: a disallowed origin is refused, an allowed one connects.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, wresp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
	require.Error(t, err)
	require.Equal(t, 403, wresp.StatusCode)
	c := dial(t, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://app.example"}}})
	c.initialize()

	// Draining: readyz turns 503 and requests get the draining error.
	d.drain.Start()
	resp, _ = get(t, hs.URL+"/readyz", nil)
	require.Equal(t, 503, resp.StatusCode)
	resp, _ = get(t, hs.URL+"/healthz", nil)
	require.Equal(t, 200, resp.StatusCode)
	m := c.call(1, "account/read", map[string]any{})
	require.JSONEq(t, `{"code":-32600,"message":"Server is draining; retry after reconnecting","data":{"reason":"serverShuttingDown"}}`, string(m["error"]))
}

// readyz answers 503 while the store is unreachable.
func TestReadyzPingsTheStore(t *testing.T) {
	st := &pinger{}
	d := newDoor(t, frontdoor.Config{Store: st})
	hs := httptest.NewServer(d.fd.Handler())
	t.Cleanup(hs.Close)
	resp, _ := get(t, hs.URL+"/readyz", nil)
	require.Equal(t, 200, resp.StatusCode)
	st.err = io.ErrUnexpectedEOF
	resp, _ = get(t, hs.URL+"/readyz", nil)
	require.Equal(t, 503, resp.StatusCode)
}

type pinger struct{ err error }

func (p *pinger) Ping(context.Context) error { return p.err }

// TestServeDrainsThenShutdownCloses checks the two halves of a shutdown
// the daemon puts its other services between: once ctx ends, Serve stops
// taking work and returns while the websockets stay open (they must still
// hear the turns end); Shutdown then closes the listener and the server's
// CloseConnections the websockets.
func TestServeDrainsThenShutdownCloses(t *testing.T) {
	drain := new(frontdoor.Drain)
	srv, err := server.New(server.Config{Draining: drain.Draining})
	require.NoError(t, err)
	fd, err := frontdoor.New(frontdoor.Config{Drain: drain, Upgrade: srv.Handler()})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- fd.Serve(ctx, ln) }()

	c := dial(t, "ws://"+ln.Addr().String(), nil)
	c.initialize()
	resp, _ := get(t, base+"/readyz", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	cancel()
	require.NoError(t, <-served)
	require.True(t, drain.Draining())
	// Draining: the open connection is still served, new work is refused.
	m := c.call(2, "account/read", map[string]any{})
	require.Contains(t, string(m["error"]), "draining")
	resp, _ = get(t, base+"/readyz", nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
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
	require.NoError(t, fd.Shutdown(sctx))
	require.NoError(t, srv.CloseConnections(sctx))
	require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(<-closed))
	_, err = http.Get(base + "/healthz")
	require.Error(t, err, "the listener is closed")
	require.NoError(t, fd.Shutdown(sctx), "a second Shutdown is harmless")
}

// TestShutdownWithoutServe checks that a front door that never served
// shuts down at once, as it does when the daemon fails before listening.
func TestShutdownWithoutServe(t *testing.T) {
	fd, err := frontdoor.New(frontdoor.Config{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, fd.Shutdown(ctx))
	require.True(t, fd.Drain().Draining())
}
