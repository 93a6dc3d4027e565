package auth_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
	appserve "github.com/appserver/appserver/internal/serve"
	"github.com/appserver/appserver/internal/store/pgtest"
)

const (
	pageOrigin  = "https://console.example"
	otherOrigin = "https://elsewhere.example"
)

// browserDaemon starts a daemon with a capability token whose page
// origin is allowed, logging at debug level into the returned buffer.
func browserDaemon(t *testing.T, token string, args ...string) (*apptest.Daemon, *apptest.SyncBuffer) {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token), 0o600))
	logs := &apptest.SyncBuffer{}
	d := apptest.StartWith(t, apptest.Options{Stderr: logs}, append([]string{"--data-dir", t.TempDir(), "--log-level", "debug",
		"--ws-auth", "capability-token", "--ws-token-file", tokenFile,
		"-c", `allowed_origins=["` + pageOrigin + `"]`}, args...)...)
	return d, logs
}

// issue posts to /v1/auth/ticket as a page of origin would ("" sends no
// Origin) and returns the status and the ticket.
func issue(t *testing.T, d *apptest.Daemon, token, origin string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, d.URL("/v1/auth/ticket"), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var tk api.HTTPTicket
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&tk))
	}
	return resp.StatusCode, tk.Ticket
}

// dialTicket opens the websocket as a browser page of origin does, with
// the ticket as a subprotocol; it returns the connection or the
// refusal's status.
func dialTicket(t *testing.T, d *apptest.Daemon, origin, ticket string) (*apptest.Client, int) {
	t.Helper()
	c, resp, err := apptest.DialWith(t, d.Addr, &websocket.DialOptions{
		HTTPHeader:   http.Header{"Origin": {origin}},
		Subprotocols: []string{"appserver", "appserver.ticket." + ticket},
	})
	if err != nil {
		require.NotNil(t, resp, "%v", err)
		return nil, resp.StatusCode
	}
	require.Equal(t, "appserver", c.WS.Subprotocol())
	return c, http.StatusSwitchingProtocols
}

// streamTicket opens a thread's event stream as an EventSource of origin
// does; on 200 it reads the stream's first line.
func streamTicket(t *testing.T, d *apptest.Daemon, threadID, origin, ticket string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL("/v1/threads/"+threadID+"/events?after=0&ticket="+ticket), nil)
	require.NoError(t, err)
	req.Header.Set("Origin", origin)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		require.Equal(t, origin, resp.Header.Get("Access-Control-Allow-Origin"))
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(line, "retry:") || strings.HasPrefix(line, "id:") || strings.HasPrefix(line, ":"), line)
	}
	return resp.StatusCode
}

// A frontend served from another origin, listed in allowed_origins,
// opens the websocket and a thread's event stream with tickets; a page
// of an origin not in the list is refused at each step; the token and
// the tickets appear in no log line.
func TestBrowserTicketsFromAnotherOrigin(t *testing.T) {
	const token = "browser-e2e-token"
	d, logs := browserDaemon(t, token)

	status, ticket := issue(t, d, token, pageOrigin)
	require.Equal(t, http.StatusOK, status)
	c, status := dialTicket(t, d, pageOrigin, ticket)
	require.Equal(t, http.StatusSwitchingProtocols, status)
	c.Initialize(nil)
	started := apptest.Decode[api.ThreadStartResult](t, c.Call("thread/start", map[string]any{}))
	_, status = dialTicket(t, d, pageOrigin, ticket)
	require.Equal(t, http.StatusUnauthorized, status, "a ticket opens one connection")

	status, sse := issue(t, d, token, pageOrigin)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, http.StatusOK, streamTicket(t, d, started.Thread.ID, pageOrigin, sse))
	require.Equal(t, http.StatusUnauthorized, streamTicket(t, d, started.Thread.ID, pageOrigin, sse), "a ticket opens one stream")

	// A page of an origin not in the list: no ticket, and a ticket it got
	// hold of opens nothing.
	status, _ = issue(t, d, token, otherOrigin)
	require.Equal(t, http.StatusForbidden, status)
	status, stolen := issue(t, d, token, "")
	require.Equal(t, http.StatusOK, status)
	_, status = dialTicket(t, d, otherOrigin, stolen)
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, http.StatusForbidden, streamTicket(t, d, started.Thread.ID, otherOrigin, stolen))
	// The refusals left it unused: the listed page still opens with it.
	_, status = dialTicket(t, d, pageOrigin, stolen)
	require.Equal(t, http.StatusSwitchingProtocols, status)

	d.Stop(t)
	out := logs.String()
	require.Contains(t, out, "level=DEBUG", "the daemon logged at debug level")
	for _, secret := range []string{token, ticket, sse, stolen} {
		require.NotContains(t, out, secret)
	}
}

// The daemon pings its websocket sessions every ws_ping_interval and
// closes one whose peer stopped answering.
func TestWebsocketPingsCloseSilentPeer(t *testing.T) {
	d := apptest.Start(t, "--data-dir", t.TempDir(), "-c", `ws_ping_interval="50ms"`, "-c", `ws_pong_timeout="500ms"`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pings := make(chan struct{}, 16)
	dial := func(answer bool) *websocket.Conn {
		ws, _, err := websocket.Dial(ctx, d.Addr, &websocket.DialOptions{OnPingReceived: func(context.Context, []byte) bool {
			select {
			case pings <- struct{}{}:
			default:
			}
			return answer
		}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = ws.CloseNow() })
		return ws
	}
	silent := dial(false)
	_, _, err := silent.Read(ctx) // pongs are not sent: the daemon hangs up
	require.Error(t, err)
	require.Equal(t, websocket.StatusCode(-1), websocket.CloseStatus(err), "torn down without a close frame: %v", err)
	require.Equal(t, float64(1), apptest.Metrics(t, d.URL("/metrics"))["appserver_ws_ping_timeouts_total"])

	answering := dial(true)
	reads := make(chan error, 1)
	go func() {
		_, _, err := answering.Read(ctx)
		reads <- err
	}()
	for range 5 {
		<-pings
	}
	select {
	case err := <-reads:
		t.Fatalf("a peer that answers pings was closed: %v", err)
	default:
	}
	require.Equal(t, float64(1), apptest.Metrics(t, d.URL("/metrics"))["appserver_ws_ping_timeouts_total"])
}

// A ticket issued by one daemon opens a websocket on another daemon of
// the same Postgres database, once across both.
func TestTicketAcrossDaemons(t *testing.T) {
	url := pgtest.URL(t)
	require.NoError(t, appserve.Migrate(context.Background(), appserve.Process{Stdout: io.Discard, Stderr: io.Discard}, []string{"--database-url", url}))
	const token = "cluster-token"
	a, _ := browserDaemon(t, token, "--database-url", url)
	b, _ := browserDaemon(t, token, "--database-url", url)

	status, ticket := issue(t, a, token, pageOrigin)
	require.Equal(t, http.StatusOK, status)
	c, status := dialTicket(t, b, pageOrigin, ticket)
	require.Equal(t, http.StatusSwitchingProtocols, status, "issued on A, taken on B")
	c.Initialize(nil)
	_, status = dialTicket(t, a, pageOrigin, ticket)
	require.Equal(t, http.StatusUnauthorized, status, "used on B: refused on A")
}
