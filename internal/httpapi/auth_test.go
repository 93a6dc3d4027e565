package httpapi

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
)

func TestAuthRejectionsWithTheWebsocketToken(t *testing.T) {
	e := newEnv(t, envOpts{token: "operator-token", principals: map[string]string{"alice": "alice-token"}})
	cases := []struct {
		name, auth, detail, challenge string
	}{
		{"no header", "", "missing bearer token", `Bearer realm="appserver"`},
		{"wrong token", "Bearer nope", "invalid bearer token", `Bearer realm="appserver", error="invalid_token"`},
		{"other scheme", "Basic b3BlcmF0b3ItdG9rZW4=", "invalid authorization header", `Bearer realm="appserver", error="invalid_token"`},
		{"empty bearer", "Bearer ", "invalid authorization header", `Bearer realm="appserver", error="invalid_token"`},
	}
	endpoints := []struct{ method, path string }{
		{"GET", "/v1/threads"},
		{"POST", "/v1/threads"},
		{"GET", "/v1/threads/01a2007c-e7fe-75b3-9b2c-d4ca854a9857/events"},
		{"GET", "/v1/no-such-route"}, // auth comes before routing: nothing about routes leaks
	}
	for _, c := range cases {
		for _, ep := range endpoints {
			t.Run(c.name+" "+ep.method+" "+ep.path, func(t *testing.T) {
				hdr := http.Header{}
				if c.auth != "" {
					hdr.Set("Authorization", c.auth)
				}
				r := e.do(req{method: ep.method, path: ep.path, token: tok(""), header: hdr})
				require.Equal(t, http.StatusUnauthorized, r.status)
				p := r.problem(t)
				require.Equal(t, api.ProblemUnauthorized, p.Type)
				require.Equal(t, c.detail, p.Detail)
				require.Equal(t, c.challenge, r.header.Get("WWW-Authenticate"))
			})
		}
	}
	// Both kinds of token get in.
	require.Equal(t, http.StatusOK, e.do(req{method: "GET", path: "/v1/threads"}).status)
	require.Equal(t, http.StatusOK, e.do(req{method: "GET", path: "/v1/threads", token: tok("alice-token")}).status)
	require.Equal(t, http.StatusOK, e.do(req{method: "GET", path: "/v1/threads", header: http.Header{"Authorization": {"bearer operator-token"}}, token: tok("")}).status,
		"the scheme is case-insensitive")
}

func TestPrincipalsWithoutWebsocketAuthRequireAToken(t *testing.T) {
	e := newEnv(t, envOpts{principals: map[string]string{"ci": "ci-token"}})
	r := e.do(req{method: "GET", path: "/v1/threads"})
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Equal(t, "missing bearer token", r.problem(t).Detail)
	r = e.do(req{method: "GET", path: "/v1/threads", token: tok("guess")})
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Equal(t, "invalid bearer token", r.problem(t).Detail)
	require.Equal(t, http.StatusOK, e.do(req{method: "GET", path: "/v1/threads", token: tok("ci-token")}).status)
}

func TestWithoutAnyAuthTheOperatorNeedsNoToken(t *testing.T) {
	// ws_auth none is only allowed on loopback, and the websocket takes
	// any header then; so does the HTTP API.
	e := newEnv(t, envOpts{})
	require.Equal(t, http.StatusOK, e.do(req{method: "GET", path: "/v1/threads"}).status)
	require.Equal(t, http.StatusOK, e.do(req{method: "GET", path: "/v1/threads", token: tok("anything")}).status)
}

func TestPrincipalsSeeOnlyTheirThreads(t *testing.T) {
	e := newEnv(t, envOpts{
		script:     `{"steps":[{"tool_calls":[{"call_id":"call_a","name":"lookup_weather","arguments":{"city":"Oslo"}}]}]}`,
		token:      "operator-token",
		principals: map[string]string{"alice": "alice-token", "bob": "bob-token"},
	})
	alice, bob := tok("alice-token"), tok("bob-token")
	ta := e.createThread(map[string]any{"dynamicTools": []any{weatherTool}}, alice)
	tb := e.createThread(nil, bob)
	to := e.createThread(nil, nil)
	require.Equal(t, Originator+"/alice", *ta.Originator)
	require.Equal(t, Originator+"/bob", *tb.Originator)
	require.Equal(t, Originator, *to.Originator)

	// Alice's running turn has a pending tool call, so every route has
	// something to find.
	r, turn := e.postTurn(ta.ID, "", textInput("weather?"), nil, alice)
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	s, _ := e.openStream(ta.ID, "?after=0", nil, alice)
	s.until(api.HTTPToolCallEventMethod)

	missing := "01a2007c-e7fe-75b3-9b2c-d4ca854a9857"
	routes := []req{
		{method: "GET", path: "/v1/threads/%s"},
		{method: "GET", path: "/v1/threads/%s/items"},
		{method: "POST", path: "/v1/threads/%s/turns", body: textInput("hijack")},
		{method: "GET", path: "/v1/threads/%s/turns/" + turn.ID},
		{method: "GET", path: "/v1/threads/%s/turns/" + turn.ID + "?wait=true"},
		{method: "POST", path: "/v1/threads/%s/turns/" + turn.ID + "/interrupt"},
		{method: "GET", path: "/v1/threads/%s/events"},
		{method: "POST", path: "/v1/threads/%s/tool-calls/call_a", body: map[string]any{"contentItems": []any{}, "success": true}},
		{method: "POST", path: "/v1/threads/%s/approvals/1", body: map[string]any{"decision": "accept"}},
		{method: "DELETE", path: "/v1/threads/%s"},
	}
	for _, rt := range routes {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			for _, id := range []string{ta.ID, missing, "not-a-uuid"} {
				x := rt
				x.path = sprintf(rt.path, id)
				x.token = bob
				got := e.do(x)
				require.Equal(t, http.StatusNotFound, got.status, "%s as bob: %s", x.path, got.body)
				p := got.problem(t)
				require.Equal(t, api.ProblemNotFound, p.Type)
				require.Equal(t, "thread "+id+" not found", p.Detail, "another principal's thread looks exactly like a missing one")
			}
		})
	}
	// Nothing bob tried reached alice's thread: the call is still pending
	// and there is still one turn.
	_, ok := e.broker.Lookup(ta.ID, "call_a")
	require.True(t, ok)
	items := e.do(req{method: "GET", path: "/v1/threads/" + ta.ID + "/items", token: alice})
	require.NotContains(t, string(items.body), "hijack")

	list := func(token *string) []string {
		var l api.HTTPThreadList
		r := e.do(req{method: "GET", path: "/v1/threads", token: token})
		require.Equal(t, http.StatusOK, r.status)
		r.decode(t, &l)
		ids := []string{}
		for _, th := range l.Data {
			ids = append(ids, th.ID)
		}
		return ids
	}
	require.Equal(t, []string{ta.ID}, list(alice))
	require.Equal(t, []string{tb.ID}, list(bob))
	require.ElementsMatch(t, []string{ta.ID, tb.ID, to.ID}, list(nil), "the operator sees every thread")
}

func TestPrincipalListingPagesSkipOtherThreads(t *testing.T) {
	e := newEnv(t, envOpts{token: "op", principals: map[string]string{"alice": "a", "bob": "b"}})
	var mine []string
	for i := range 7 {
		if i%3 == 0 {
			mine = append(mine, e.createThread(nil, tok("a")).ID)
		} else {
			e.createThread(nil, tok("b"))
		}
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		path := "/v1/threads?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := e.do(req{method: "GET", path: path, token: tok("a")})
		require.Equal(t, http.StatusOK, r.status, string(r.body))
		var l api.HTTPThreadList
		r.decode(t, &l)
		require.LessOrEqual(t, len(l.Data), 2)
		for _, th := range l.Data {
			got = append(got, th.ID)
		}
		if l.NextCursor == nil {
			break
		}
		cursor = *l.NextCursor
	}
	// Newest first, each exactly once.
	want := []string{mine[2], mine[1], mine[0]}
	require.Equal(t, want, got)
}
