package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/auth"
)

const (
	appOrigin   = "https://app.example"
	adminOrigin = "https://admin.example"
	evilOrigin  = "https://evil.example"
)

// lockedBuffer collects log lines written from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// browserEnv is a daemon with a capability token, the principal alice and
// two allowed page origins.
func browserEnv(t *testing.T, logs *lockedBuffer) *env {
	o := envOpts{token: "operator-token", principals: map[string]string{"alice": "alice-token"}, origins: []string{appOrigin, adminOrigin}}
	if logs != nil {
		o.logs = logs
	}
	return newEnv(t, o)
}

// ticket asks for a ticket with token (and Origin, when not "").
func (e *env) ticket(token, origin string) api.HTTPTicket {
	e.t.Helper()
	var hdr http.Header
	if origin != "" {
		hdr = http.Header{"Origin": {origin}}
	}
	r := e.do(req{method: "POST", path: "/v1/auth/ticket", token: tok(token), header: hdr})
	require.Equal(e.t, http.StatusOK, r.status, string(r.body))
	require.Equal(e.t, "no-store", r.header.Get("Cache-Control"))
	var tk api.HTTPTicket
	r.decode(e.t, &tk)
	require.EqualValues(e.t, 30, tk.ExpiresIn)
	return tk
}

// dialWith opens a websocket with opts; it returns the connection or the
// refusal's status and body.
func (e *env) dialWith(query string, opts *websocket.DialOptions) (*websocket.Conn, int, string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.url, "http")+query, opts)
	if err != nil {
		require.NotNil(e.t, resp, "%v", err)
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return nil, resp.StatusCode, b.String()
	}
	e.t.Cleanup(func() { _ = ws.CloseNow() })
	return ws, http.StatusSwitchingProtocols, ""
}

// startFirstTurn runs a thread's first turn, as token's principal:
// thread/list (wsThreads) shows a thread once a user message has started
// it.
func (e *env) startFirstTurn(th api.Thread, token *string) {
	e.t.Helper()
	r, _ := e.postTurn(th.ID, "?wait=true", textInput("hi"), nil, token)
	require.Equal(e.t, http.StatusOK, r.status, string(r.body))
}

// who asks an open websocket which threads it sees by thread/list.
func wsThreads(t *testing.T, ws *websocket.Conn) []string {
	c := &wsClient{t: t, ws: ws}
	c.call("initialize", map[string]any{"clientInfo": map[string]any{"name": "browser", "version": "1"}})
	var res api.ThreadListResult
	require.NoError(t, json.Unmarshal(c.call("thread/list", map[string]any{}), &res))
	ids := make([]string, 0, len(res.Data))
	for _, th := range res.Data {
		ids = append(ids, th.ID)
	}
	return ids
}

func ticketProtocols(ticket string) *websocket.DialOptions {
	return &websocket.DialOptions{Subprotocols: []string{auth.WebSocketProtocol, auth.TicketProtocolPrefix + ticket}}
}

// A ticket opens one websocket or one event stream as whom it was issued
// to; the server selects the plain subprotocol, never the ticket; a
// ticket is refused a second time, from another origin, alongside a
// bearer token, and after it expired; no log line holds the token or a
// ticket.
func TestTicketOpensOneConnection(t *testing.T) {
	logs := &lockedBuffer{}
	e := browserEnv(t, logs)
	mine := e.createThread(nil, tok("alice-token"))
	e.startFirstTurn(mine, tok("alice-token"))
	e.startFirstTurn(e.createThread(nil, nil), nil) // the operator's

	// The websocket, by subprotocol, as alice.
	tk := e.ticket("alice-token", appOrigin)
	opts := ticketProtocols(tk.Ticket)
	opts.HTTPHeader = http.Header{"Origin": {appOrigin}}
	ws, status, body := e.dialWith("", opts)
	require.Equal(t, http.StatusSwitchingProtocols, status, body)
	require.Equal(t, auth.WebSocketProtocol, ws.Subprotocol(), "the plain subprotocol is selected, the ticket never echoed")
	require.Equal(t, []string{mine.ID}, wsThreads(t, ws), "the session is alice's")
	_, status, body = e.dialWith("", opts)
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, "invalid or already used ticket", body)

	// The websocket by query, as the operator; then its event stream.
	op := e.ticket("operator-token", "")
	ws, status, body = e.dialWith("?ticket="+op.Ticket, nil)
	require.Equal(t, http.StatusSwitchingProtocols, status, body)
	require.Empty(t, ws.Subprotocol())
	require.Len(t, wsThreads(t, ws), 2)

	st := e.ticket("alice-token", appOrigin)
	s, r := e.openStream(mine.ID, "?after=0&ticket="+st.Ticket, http.Header{"Origin": {appOrigin}}, tok(""))
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	s.close()
	_, r = e.openStream(mine.ID, "?ticket="+st.Ticket, nil, tok(""))
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Equal(t, "invalid or already used ticket", r.problem(t).Detail)

	// From another allowed page than the one that asked.
	other := e.ticket("alice-token", appOrigin)
	_, r = e.openStream(mine.ID, "?ticket="+other.Ticket, http.Header{"Origin": {adminOrigin}}, tok(""))
	require.Equal(t, http.StatusForbidden, r.status)
	require.Equal(t, "ticket issued to another origin", r.problem(t).Detail)
	other = e.ticket("alice-token", appOrigin)
	_, status, body = e.dialWith("?ticket="+other.Ticket, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {adminOrigin}}})
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, "ticket issued to another origin", body)
	// From a page not in allowed_origins: the front door refuses first.
	other = e.ticket("alice-token", "")
	_, r = e.openStream(mine.ID, "?ticket="+other.Ticket, http.Header{"Origin": {evilOrigin}}, tok(""))
	require.Equal(t, http.StatusForbidden, r.status)
	_, status, _ = e.dialWith("", &websocket.DialOptions{Subprotocols: []string{auth.WebSocketProtocol, auth.TicketProtocolPrefix + other.Ticket}, HTTPHeader: http.Header{"Origin": {evilOrigin}}})
	require.Equal(t, http.StatusForbidden, status)
	r = e.do(req{method: "POST", path: "/v1/auth/ticket", token: tok("alice-token"), header: http.Header{"Origin": {evilOrigin}}})
	require.Equal(t, http.StatusForbidden, r.status, "no ticket for a page not in allowed_origins")

	// One credential at a time; a ticket the daemon never issued.
	other = e.ticket("alice-token", "")
	_, r = e.openStream(mine.ID, "?ticket="+other.Ticket, nil, tok("alice-token"))
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Contains(t, r.problem(t).Detail, "more than one credential")
	_, r = e.openStream(mine.ID, "?ticket="+strings.Repeat("A", 43), nil, tok(""))
	require.Equal(t, http.StatusUnauthorized, r.status)

	// Expired.
	late := e.ticket("alice-token", "")
	e.advance(30 * time.Second)
	_, r = e.openStream(mine.ID, "?ticket="+late.Ticket, nil, tok(""))
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Equal(t, "expired ticket", r.problem(t).Detail)

	// Only a bearer token issues tickets and sessions, and the other
	// routes take no ticket.
	spare := e.ticket("alice-token", "")
	for _, path := range []string{"/v1/auth/ticket", "/v1/auth/session"} {
		r = e.do(req{method: "POST", path: path + "?ticket=" + spare.Ticket, token: tok("")})
		require.Equal(t, http.StatusUnauthorized, r.status, path)
	}
	r = e.do(req{method: "GET", path: "/v1/threads?ticket=" + spare.Ticket, token: tok("")})
	require.Equal(t, http.StatusUnauthorized, r.status)
	ws, status, body = e.dialWith("?ticket="+spare.Ticket, nil)
	require.Equal(t, http.StatusSwitchingProtocols, status, "still unused: %s", body)
	require.Equal(t, []string{mine.ID}, wsThreads(t, ws))

	// A websocket client that never heard of tickets still connects.
	ws, status, _ = e.dialWith("", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer operator-token"}}})
	require.Equal(t, http.StatusSwitchingProtocols, status)
	require.Empty(t, ws.Subprotocol())

	e.close()
	out := logs.String()
	require.NotEmpty(t, out, "the daemon logged at debug level")
	for _, secret := range []string{"operator-token", "alice-token", tk.Ticket, op.Ticket, st.Ticket, spare.Ticket, late.Ticket} {
		require.NotContains(t, out, secret)
	}
}

// The session cookie: set by a bearer token, taken by reads without
// more, by what changes something and by the upgrade only with an
// allowed Origin; ended by DELETE on every route.
func TestSessionCookie(t *testing.T) {
	logs := &lockedBuffer{}
	e := browserEnv(t, logs)
	r := e.do(req{method: "POST", path: "/v1/auth/session", token: tok("alice-token"), header: http.Header{"Origin": {appOrigin}}})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var sess api.HTTPSession
	r.decode(t, &sess)
	require.EqualValues(t, 12*3600, sess.ExpiresIn)
	cookies := (&http.Response{Header: r.header}).Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	require.Equal(t, auth.SessionCookie, c.Name)
	require.True(t, c.HttpOnly)
	require.False(t, c.Secure, "not over TLS")
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.Equal(t, "/", c.Path)
	require.Equal(t, 12*3600, c.MaxAge)
	cookie := http.Header{"Cookie": {c.Name + "=" + c.Value}}
	with := func(origin string) http.Header {
		h := cookie.Clone()
		if origin != "" {
			h.Set("Origin", origin)
		}
		return h
	}

	// Reads: no Origin needed (a same-origin GET carries none).
	r = e.do(req{method: "GET", path: "/v1/threads", token: tok(""), header: cookie})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	// A write without an Origin: refused, as a cross-site form would be.
	r = e.do(req{method: "POST", path: "/v1/threads", body: map[string]any{}, token: tok(""), header: cookie})
	require.Equal(t, http.StatusForbidden, r.status)
	require.Equal(t, "a request authenticated by the session cookie must carry an Origin header", r.problem(t).Detail)
	// From a page not in allowed_origins: refused by the front door.
	r = e.do(req{method: "POST", path: "/v1/threads", body: map[string]any{}, token: tok(""), header: with(evilOrigin)})
	require.Equal(t, http.StatusForbidden, r.status)
	// From another allowed page than the one that logged in.
	r = e.do(req{method: "POST", path: "/v1/threads", body: map[string]any{}, token: tok(""), header: with(adminOrigin)})
	require.Equal(t, http.StatusForbidden, r.status)
	require.Equal(t, "session cookie issued to another origin", r.problem(t).Detail)
	r = e.do(req{method: "POST", path: "/v1/threads", body: map[string]any{}, token: tok(""), header: with(appOrigin)})
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	var th api.HTTPThread
	r.decode(t, &th)
	require.Equal(t, "true", r.header.Get("Access-Control-Allow-Credentials"))
	e.startFirstTurn(th.Thread, tok("alice-token"))

	// The upgrade needs the Origin too.
	_, status, body := e.dialWith("", &websocket.DialOptions{HTTPHeader: cookie})
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, "a request authenticated by the session cookie must carry an Origin header", body)
	ws, status, body := e.dialWith("", &websocket.DialOptions{HTTPHeader: with(appOrigin)})
	require.Equal(t, http.StatusSwitchingProtocols, status, body)
	require.Equal(t, []string{th.Thread.ID}, wsThreads(t, ws), "the session is alice's")

	// The cookie neither issues tickets nor starts sessions.
	r = e.do(req{method: "POST", path: "/v1/auth/ticket", token: tok(""), header: with(appOrigin)})
	require.Equal(t, http.StatusUnauthorized, r.status)

	// Logging out: the session ends and the cookie is cleared.
	r = e.do(req{method: "DELETE", path: "/v1/auth/session", token: tok(""), header: cookie})
	require.Equal(t, http.StatusForbidden, r.status, "logging out is a change: it needs the Origin")
	r = e.do(req{method: "DELETE", path: "/v1/auth/session", token: tok(""), header: with(appOrigin)})
	require.Equal(t, http.StatusNoContent, r.status, string(r.body))
	cleared := (&http.Response{Header: r.header}).Cookies()
	require.Len(t, cleared, 1)
	require.Equal(t, auth.SessionCookie, cleared[0].Name)
	require.Equal(t, -1, cleared[0].MaxAge)
	r = e.do(req{method: "GET", path: "/v1/threads", token: tok(""), header: cookie})
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Equal(t, "invalid or expired session cookie", r.problem(t).Detail)
	_, status, _ = e.dialWith("", &websocket.DialOptions{HTTPHeader: with(appOrigin)})
	require.Equal(t, http.StatusUnauthorized, status)

	// Expired.
	r = e.do(req{method: "POST", path: "/v1/auth/session", token: tok("alice-token")})
	require.Equal(t, http.StatusOK, r.status)
	late := (&http.Response{Header: r.header}).Cookies()[0]
	e.advance(12 * time.Hour)
	r = e.do(req{method: "GET", path: "/v1/threads", token: tok(""), header: http.Header{"Cookie": {late.Name + "=" + late.Value}}})
	require.Equal(t, http.StatusUnauthorized, r.status)

	e.close()
	out := logs.String()
	for _, secret := range []string{"alice-token", c.Value, late.Value} {
		require.NotContains(t, out, secret)
	}
}

// On loopback without ws_auth nothing of this is needed: the websocket
// and the API take requests without credentials, and a stale cookie or
// tickets change nothing of that.
func TestNoAuthNeedsNoBrowserCredential(t *testing.T) {
	e := newEnv(t, envOpts{})
	th := e.createThread(nil, nil)
	e.startFirstTurn(th, nil)
	ws, status, body := e.dialWith("", nil)
	require.Equal(t, http.StatusSwitchingProtocols, status, body)
	require.Equal(t, []string{th.ID}, wsThreads(t, ws))
	s, r := e.openStream(th.ID, "?after=0", nil, nil)
	require.Equal(t, http.StatusOK, r.status)
	s.close()
	stale := http.Header{"Cookie": {auth.SessionCookie + "=" + strings.Repeat("A", 43)}}
	r = e.do(req{method: "POST", path: "/v1/threads", body: map[string]any{}, header: stale})
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	tk := e.ticket("", "")
	ws, status, body = e.dialWith("", ticketProtocols(tk.Ticket))
	require.Equal(t, http.StatusSwitchingProtocols, status, body)
	require.Equal(t, auth.WebSocketProtocol, ws.Subprotocol())
}
