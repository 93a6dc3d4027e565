package auth_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/auth"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/memory"
)

const aliceToken = "alice-token"

// browserFixture is an authenticator with a capability token and the
// principal alice, and browser credentials in a memory store on a clock
// the test moves.
type browserFixture struct {
	a     *auth.Authenticator
	b     *auth.Browser
	st    *memory.Store
	mu    sync.Mutex
	clock time.Time
}

func newBrowserFixture(t *testing.T) *browserFixture {
	t.Helper()
	alice := sha256.Sum256([]byte(aliceToken))
	digest := sha256.Sum256([]byte(testToken))
	f := &browserFixture{
		a: newAuth(t, auth.Config{
			Mode: auth.CapabilityToken, TokenSHA256: hex.EncodeToString(digest[:]),
			Principals: map[string]string{"alice": hex.EncodeToString(alice[:])},
		}),
		st:    memory.New(memory.Config{}),
		clock: testNow,
	}
	b, err := auth.NewBrowser(auth.BrowserConfig{Store: f.st, TicketTTL: 10 * time.Second, SessionTTL: time.Hour, Now: f.now})
	require.NoError(t, err)
	f.b = b
	return f
}

func (f *browserFixture) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clock
}

func (f *browserFixture) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clock = f.clock.Add(d)
}

// request builds a request; hdr values are set as they are.
func request(method, target string, hdr map[string]string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	return r
}

func (f *browserFixture) identify(r *http.Request, door auth.Door) (string, *auth.Failure) {
	return auth.Identify(context.Background(), f.a, f.b, r, door)
}

func requireRefused(t *testing.T, status int, msg string, f *auth.Failure) {
	t.Helper()
	require.NotNil(t, f)
	require.Equal(t, status, f.Status)
	require.Equal(t, msg, f.Message)
}

// A ticket stands for whom it was issued to, once, until it expires, on
// the doors that take tickets, in the subprotocol or the query.
func TestTicket(t *testing.T) {
	f := newBrowserFixture(t)
	ctx := context.Background()
	issue := func(subject, origin string) string {
		g, err := f.b.IssueTicket(ctx, subject, origin)
		require.NoError(t, err)
		require.Equal(t, 10*time.Second, g.TTL)
		require.Len(t, g.Secret, 43, "256 bits, base64url without padding")
		return g.Secret
	}

	tk := issue("alice", "")
	who, fail := f.identify(request("GET", "/", map[string]string{
		"Sec-WebSocket-Protocol": auth.WebSocketProtocol + ", " + auth.TicketProtocolPrefix + tk,
	}), auth.WebSocketDoor)
	require.Nil(t, fail)
	require.Equal(t, "alice", who)
	_, fail = f.identify(request("GET", "/", map[string]string{"Sec-WebSocket-Protocol": auth.TicketProtocolPrefix + tk}), auth.WebSocketDoor)
	requireRefused(t, 401, "invalid or already used ticket", fail)

	op := issue("", "")
	who, fail = f.identify(request("GET", "/v1/threads/x/events?after=3&ticket="+op, nil), auth.EventStreamDoor)
	require.Nil(t, fail)
	require.Equal(t, "", who, "the operator's ticket")

	// Expired: refused, and used up all the same.
	late := issue("alice", "")
	f.advance(10 * time.Second)
	_, fail = f.identify(request("GET", "/?ticket="+late, nil), auth.EventStreamDoor)
	requireRefused(t, 401, "expired ticket", fail)
	_, found, err := f.st.GetCredential(ctx, store.CredentialTicket, digest(t, late))
	require.NoError(t, err)
	require.False(t, found, "used up")

	// Not a ticket the daemon could have issued; a session's secret.
	for _, bad := range []string{"", "short", strings.Repeat("!", 43), tk + "A"} {
		_, fail = f.identify(request("GET", "/", map[string]string{"Sec-WebSocket-Protocol": auth.TicketProtocolPrefix + bad}), auth.WebSocketDoor)
		requireRefused(t, 401, "invalid or already used ticket", fail)
	}
	sess, err := f.b.StartSession(ctx, "alice", "")
	require.NoError(t, err)
	_, fail = f.identify(request("GET", "/?ticket="+sess.Secret, nil), auth.EventStreamDoor)
	requireRefused(t, 401, "invalid or already used ticket", fail)

	// One credential per request.
	two := issue("alice", "")
	_, fail = f.identify(request("GET", "/?ticket="+two, map[string]string{"Authorization": "Bearer " + testToken}), auth.EventStreamDoor)
	requireRefused(t, 401, "more than one credential: send a ticket or an Authorization header, once", fail)
	_, fail = f.identify(request("GET", "/?ticket="+two+"&ticket="+two, nil), auth.EventStreamDoor)
	requireRefused(t, 401, "more than one credential: send a ticket or an Authorization header, once", fail)
	_, fail = f.identify(request("GET", "/?ticket="+two, map[string]string{"Sec-WebSocket-Protocol": auth.TicketProtocolPrefix + two}), auth.WebSocketDoor)
	requireRefused(t, 401, "more than one credential: send a ticket or an Authorization header, once", fail)

	// A door that takes no tickets does not look for one: the ticket
	// stays unused, the request has no credential.
	_, fail = f.identify(request("GET", "/?ticket="+two, nil), auth.APIDoor)
	requireRefused(t, 401, "missing websocket bearer token", fail)
	_, fail = f.identify(request("GET", "/", map[string]string{"Sec-WebSocket-Protocol": auth.TicketProtocolPrefix + two}), auth.EventStreamDoor)
	requireRefused(t, 401, "missing websocket bearer token", fail)
	who, fail = f.identify(request("GET", "/?ticket="+two, nil), auth.WebSocketDoor)
	require.Nil(t, fail)
	require.Equal(t, "alice", who, "the upgrade takes the query form too")

	// Without a Browser, a ticket is refused, not ignored.
	_, fail = auth.Identify(ctx, f.a, nil, request("GET", "/?ticket="+issue("alice", ""), nil), auth.EventStreamDoor)
	requireRefused(t, 401, "tickets are not taken here", fail)
}

func digest(t *testing.T, secret string) []byte {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(secret)
	require.NoError(t, err)
	d := sha256.Sum256(raw)
	return d[:]
}

// A ticket or session issued to a page's origin is refused from another
// origin; one issued without an origin (by a server for its page) is
// taken from any, and a request without an Origin is not a browser's
// cross-origin request.
func TestCredentialOrigin(t *testing.T) {
	f := newBrowserFixture(t)
	ctx := context.Background()
	ticket := func(origin string) string {
		g, err := f.b.IssueTicket(ctx, "alice", origin)
		require.NoError(t, err)
		return g.Secret
	}
	for _, c := range []struct {
		bound, origin string
		ok            bool
	}{
		{"https://app.example", "https://app.example", true},
		{"https://app.example", "https://other.example", false},
		{"https://app.example", "", true},
		{"", "https://other.example", true},
	} {
		_, fail := f.identify(request("GET", "/?ticket="+ticket(c.bound), map[string]string{"Origin": c.origin}), auth.EventStreamDoor)
		if c.ok {
			require.Nil(t, fail, "%+v", c)
		} else {
			requireRefused(t, 403, "ticket issued to another origin", fail)
		}
	}

	s, err := f.b.StartSession(ctx, "alice", "https://app.example")
	require.NoError(t, err)
	cookie := auth.SessionCookie + "=" + s.Secret
	_, fail := f.identify(request("POST", "/v1/threads", map[string]string{"Cookie": cookie, "Origin": "https://other.example"}), auth.APIDoor)
	requireRefused(t, 403, "session cookie issued to another origin", fail)
	who, fail := f.identify(request("POST", "/v1/threads", map[string]string{"Cookie": cookie, "Origin": "https://app.example"}), auth.APIDoor)
	require.Nil(t, fail)
	require.Equal(t, "alice", who)
}

// The session cookie: taken by the upgrade and the API while it lives;
// what changes something, and the upgrade, must carry an Origin; a
// cookie naming no live session counts as absent; an explicit
// credential goes first; ending the session ends the cookie.
func TestSessionCookie(t *testing.T) {
	f := newBrowserFixture(t)
	ctx := context.Background()
	s, err := f.b.StartSession(ctx, "alice", "")
	require.NoError(t, err)
	require.Equal(t, time.Hour, s.TTL)
	cookie := auth.SessionCookie + "=" + s.Secret

	for _, door := range []auth.Door{auth.APIDoor, auth.EventStreamDoor, auth.WebSocketDoor} {
		who, fail := f.identify(request("GET", "/", map[string]string{"Cookie": cookie, "Origin": "https://app.example"}), door)
		require.Nil(t, fail)
		require.Equal(t, "alice", who)
	}
	who, fail := f.identify(request("GET", "/v1/threads", map[string]string{"Cookie": cookie}), auth.APIDoor)
	require.Nil(t, fail, "a same-origin read carries no Origin")
	require.Equal(t, "alice", who)
	for _, m := range []string{"POST", "DELETE", "PUT", "PATCH"} {
		_, fail = f.identify(request(m, "/v1/threads", map[string]string{"Cookie": cookie}), auth.APIDoor)
		requireRefused(t, 403, "a request authenticated by the session cookie must carry an Origin header", fail)
	}
	_, fail = f.identify(request("GET", "/", map[string]string{"Cookie": cookie}), auth.WebSocketDoor)
	requireRefused(t, 403, "a request authenticated by the session cookie must carry an Origin header", fail)
	_, fail = f.identify(request("GET", "/", map[string]string{"Cookie": cookie}), auth.BearerDoor)
	requireRefused(t, 401, "missing websocket bearer token", fail)

	// The Authorization header goes first: the operator's token with
	// alice's cookie is the operator, without the Origin rule.
	who, fail = f.identify(request("POST", "/v1/threads", map[string]string{"Cookie": cookie, "Authorization": "Bearer " + testToken}), auth.APIDoor)
	require.Nil(t, fail)
	require.Equal(t, "", who)

	require.NoError(t, f.b.EndSession(ctx, s.Secret))
	_, fail = f.identify(request("GET", "/", map[string]string{"Cookie": cookie}), auth.APIDoor)
	requireRefused(t, 401, "invalid or expired session cookie", fail)
	require.NoError(t, f.b.EndSession(ctx, s.Secret), "ending it again ends nothing")
	require.NoError(t, f.b.EndSession(ctx, "not-a-secret"))

	s2, err := f.b.StartSession(ctx, "alice", "")
	require.NoError(t, err)
	f.advance(time.Hour)
	_, fail = f.identify(request("GET", "/", map[string]string{"Cookie": auth.SessionCookie + "=" + s2.Secret}), auth.APIDoor)
	requireRefused(t, 401, "invalid or expired session cookie", fail)

	// Where no credential is needed, a dead cookie does not get in the way.
	open, err := auth.New(auth.Config{})
	require.NoError(t, err)
	who, fail = auth.Identify(ctx, open, f.b, request("POST", "/", map[string]string{"Cookie": cookie}), auth.APIDoor)
	require.Nil(t, fail)
	require.Equal(t, "", who)
	who, fail = auth.Identify(ctx, nil, f.b, request("GET", "/", nil), auth.WebSocketDoor)
	require.Nil(t, fail)
	require.Equal(t, "", who)

	c := s.Cookie(true)
	require.True(t, c.HttpOnly)
	require.True(t, c.Secure)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.Equal(t, "/", c.Path)
	require.Equal(t, 3600, c.MaxAge)
	require.False(t, s.Cookie(false).Secure)
	require.Equal(t, -1, auth.ClearedSessionCookie(false).MaxAge)
}

// failingStore fails every call as an unreachable database does.
type failingStore struct{}

func (failingStore) PutCredential(context.Context, store.Credential, time.Time) error {
	return apperr.New(apperr.Unavailable, "down")
}

func (failingStore) GetCredential(context.Context, store.CredentialKind, []byte) (store.Credential, bool, error) {
	return store.Credential{}, false, apperr.New(apperr.Unavailable, "down")
}

func (failingStore) DeleteCredential(context.Context, store.CredentialKind, []byte) (store.Credential, bool, error) {
	return store.Credential{}, false, apperr.New(apperr.Unavailable, "down")
}

// An unreachable store refuses with 503, never admits.
func TestBrowserStoreDown(t *testing.T) {
	b, err := auth.NewBrowser(auth.BrowserConfig{Store: failingStore{}})
	require.NoError(t, err)
	_, err = b.IssueTicket(context.Background(), "", "")
	require.True(t, apperr.Is(err, apperr.Unavailable))
	secret := strings.Repeat("A", 43)
	_, fail := auth.Identify(context.Background(), nil, b, request("GET", "/?ticket="+secret, nil), auth.EventStreamDoor)
	requireRefused(t, 503, "cannot check the credential now", fail)
	_, fail = auth.Identify(context.Background(), nil, b, request("GET", "/", map[string]string{"Cookie": auth.SessionCookie + "=" + secret}), auth.APIDoor)
	requireRefused(t, 503, "cannot check the credential now", fail)

	_, err = auth.NewBrowser(auth.BrowserConfig{})
	require.Error(t, err)
}

// WithoutTicket leaves nothing of the ticket in the request a handler
// gets, and leaves the caller's request as it was.
func TestWithoutTicket(t *testing.T) {
	r := request("GET", "/v1/threads/t/events?after=5&ticket=SECRET&until=turnCompleted", nil)
	r2 := auth.WithoutTicket(r)
	require.NotContains(t, r2.URL.String(), "SECRET")
	require.NotContains(t, r2.RequestURI, "SECRET")
	require.Equal(t, "5", r2.URL.Query().Get("after"))
	require.Equal(t, "turnCompleted", r2.URL.Query().Get("until"))
	require.Contains(t, r.URL.RawQuery, "SECRET", "the original is not changed")
	plain := request("GET", "/v1/threads?limit=2", nil)
	require.Same(t, plain, auth.WithoutTicket(plain))
}
