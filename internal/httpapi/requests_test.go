package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
)

var sprintf = fmt.Sprintf

// weatherTool is a client-registered tool.
var weatherTool = map[string]any{
	"type": "function", "name": "lookup_weather", "description": "Look up the weather",
	"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
}

func TestBadRequestsGetProblems(t *testing.T) {
	e := newEnv(t, envOpts{config: func(c *Config) { c.MaxBodyBytes = 4096 }})
	th := e.createThread(nil, nil)
	r, turn := e.postTurn(th.ID, "?wait=true", textInput("hi"), nil, nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	turns := "/v1/threads/" + th.ID + "/turns"
	cases := []struct {
		name   string
		req    req
		status int
		typ    string
		detail string
	}{
		{"unknown field", req{method: "POST", path: turns, body: `{"input":[{"type":"text","text":"x"}],"inputs":[]}`},
			400, api.ProblemInvalidRequest, `unknown field "inputs"`},
		{"unknown field on thread create", req{method: "POST", path: "/v1/threads", body: `{"cwd":"/tmp","ephemeral":true}`},
			400, api.ProblemInvalidRequest, `unknown field "ephemeral"`},
		{"malformed JSON", req{method: "POST", path: turns, body: `{"input":[`},
			400, api.ProblemInvalidRequest, "malformed JSON"},
		{"wrong type", req{method: "POST", path: turns, body: `{"input":"hi"}`},
			400, api.ProblemInvalidRequest, `field "input"`},
		{"trailing data", req{method: "POST", path: turns, body: `{"input":[{"type":"text","text":"x"}]} {}`},
			400, api.ProblemInvalidRequest, "unexpected data after the JSON body"},
		{"empty body", req{method: "POST", path: turns, body: ` `},
			400, api.ProblemInvalidRequest, "the request body is empty"},
		{"no input", req{method: "POST", path: turns, body: `{"input":[]}`},
			400, api.ProblemInvalidRequest, "input must hold at least one item"},
		{"NUL in text", req{method: "POST", path: turns, body: `{"input":[{"type":"text","text":"a\u0000b"}]}`},
			400, api.ProblemInvalidRequest, `input[0].text contains a NUL character`},
		{"unknown field in an input item", req{method: "POST", path: turns, body: `{"input":[{"type":"text","text":"x","txet":"y"}]}`},
			400, api.ProblemInvalidRequest, `input[0]: unknown field "txet"`},
		{"unknown field nested in an input item", req{method: "POST", path: turns, body: `{"input":[{"type":"text","text":"x","text_elements":[{"byteRange":{"start":0,"end":1},"placeholder":null,"extra":1}]}]}`},
			400, api.ProblemInvalidRequest, `input[0]: unknown field "extra"`},
		{"unknown input type", req{method: "POST", path: turns, body: `{"input":[{"type":"video","url":"x"}]}`},
			400, api.ProblemInvalidRequest, `unknown input type "video"`},
		{"image without url", req{method: "POST", path: turns, body: `{"input":[{"type":"image"}]}`},
			400, api.ProblemInvalidRequest, "image needs url or fileId"},
		{"bad wait", req{method: "POST", path: turns + "?wait=soon", body: textInput("x")},
			400, api.ProblemInvalidRequest, "wait must be true or false"},
		{"bad Prefer wait", req{method: "POST", path: turns, body: textInput("x"), header: http.Header{"Prefer": {"wait=forever"}}},
			400, api.ProblemInvalidRequest, "Prefer: wait must be a whole number of seconds"},
		{"bad idempotency key", req{method: "POST", path: turns, body: textInput("x"), header: http.Header{"Idempotency-Key": {strings.Repeat("k", 256)}}},
			400, api.ProblemInvalidRequest, "Idempotency-Key must be 1-255 visible ASCII characters"},
		{"empty cwd", req{method: "POST", path: "/v1/threads", body: `{"cwd":" "}`},
			400, api.ProblemInvalidRequest, "cwd must not be empty"},
		{"bad sandbox", req{method: "POST", path: "/v1/threads", body: `{"sandbox":"everything"}`},
			400, api.ProblemInvalidRequest, ""},
		{"bad limit", req{method: "GET", path: "/v1/threads?limit=1000"},
			400, api.ProblemInvalidRequest, "limit must be an integer from 0 to 100"},
		{"zero limit", req{method: "GET", path: "/v1/threads?limit=0"},
			400, api.ProblemInvalidRequest, "limit must be from 1 to 100"},
		{"bad archived", req{method: "GET", path: "/v1/threads?archived=maybe"},
			400, api.ProblemInvalidRequest, "archived must be true or false"},
		{"bad cursor", req{method: "GET", path: "/v1/threads?cursor=garbage"},
			400, api.ProblemInvalidRequest, ""},
		{"bad items cursor", req{method: "GET", path: "/v1/threads/" + th.ID + "/items?cursor=garbage"},
			400, api.ProblemInvalidRequest, "invalid cursor"},
		{"bad since", req{method: "GET", path: "/v1/threads/" + th.ID + "/items?since=-1"},
			400, api.ProblemInvalidRequest, "since must be an integer"},
		{"bad after", req{method: "GET", path: "/v1/threads/" + th.ID + "/events?after=x"},
			400, api.ProblemInvalidRequest, "after must be an event sequence number"},
		{"bad Last-Event-ID", req{method: "GET", path: "/v1/threads/" + th.ID + "/events", header: http.Header{"Last-Event-Id": {"-3"}}},
			400, api.ProblemInvalidRequest, "Last-Event-ID must be an event sequence number"},
		{"NUL in a query parameter", req{method: "GET", path: "/v1/threads/" + th.ID + "/items?turnId=a%00b"},
			400, api.ProblemInvalidRequest, `query parameter "turnId" contains a NUL character`},
		{"NUL in a cursor", req{method: "GET", path: "/v1/threads?cursor=%00"},
			400, api.ProblemInvalidRequest, `query parameter "cursor" contains a NUL character`},
		{"NUL in the path", req{method: "GET", path: turns + "/a%00b"},
			400, api.ProblemInvalidRequest, "the path contains a NUL character"},
		{"bad until", req{method: "GET", path: "/v1/threads/" + th.ID + "/events?until=forever"},
			400, api.ProblemInvalidRequest, `until must be "turnCompleted"`},
		{"invalid tool answer", req{method: "POST", path: "/v1/threads/" + th.ID + "/tool-calls/c1", body: `{"contentItems":[{"type":"inputText"}],"success":true}`},
			400, api.ProblemInvalidRequest, "missing field `text`"},
		{"tool answer without success", req{method: "POST", path: "/v1/threads/" + th.ID + "/tool-calls/c1", body: `{"contentItems":[]}`},
			400, api.ProblemInvalidRequest, "missing field `success`"},
		{"not JSON", req{method: "POST", path: turns, body: "input=hi", header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}},
			415, api.ProblemUnsupportedMediaType, "must be application/json"},
		{"too large", req{method: "POST", path: turns, body: `{"input":[{"type":"text","text":"` + strings.Repeat("x", 5000) + `"}]}`},
			413, api.ProblemPayloadTooLarge, "exceeds 4096 bytes"},
		{"unknown route", req{method: "GET", path: "/v1/nothing"},
			404, api.ProblemNotFound, "no such endpoint"},
		{"unknown thread", req{method: "GET", path: "/v1/threads/01a2007c-e7fe-75b3-9b2c-d4ca854a9857"},
			404, api.ProblemNotFound, "thread 01a2007c-e7fe-75b3-9b2c-d4ca854a9857 not found"},
		{"unknown turn", req{method: "GET", path: turns + "/01a2007c-e7fe-75b3-9b2c-d4ca854a9857"},
			404, api.ProblemNotFound, "turn 01a2007c-e7fe-75b3-9b2c-d4ca854a9857 not found"},
		{"wait on an unknown turn", req{method: "GET", path: turns + "/01a2007c-e7fe-75b3-9b2c-d4ca854a9857?wait=true"},
			404, api.ProblemNotFound, "not found"},
		{"interrupt an unknown turn", req{method: "POST", path: turns + "/01a2007c-e7fe-75b3-9b2c-d4ca854a9857/interrupt"},
			404, api.ProblemNotFound, "not found"},
		{"interrupt a finished turn", req{method: "POST", path: turns + "/" + turn.ID + "/interrupt"},
			409, api.ProblemConflict, "turn " + turn.ID + " is not running"},
		{"unknown tool call", req{method: "POST", path: "/v1/threads/" + th.ID + "/tool-calls/c1", body: `{"contentItems":[],"success":true}`},
			404, api.ProblemNotFound, "no pending tool call c1"},
		{"wrong method", req{method: "PUT", path: "/v1/threads/" + th.ID},
			405, api.ProblemMethodNotAllowed, "PUT is not allowed"},
		{"unknown approval", req{method: "POST", path: "/v1/threads/" + th.ID + "/approvals/7", body: `{"decision":"accept"}`},
			404, api.ProblemNotFound, "no pending request 7"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(c.req)
			require.Equal(t, c.status, r.status, string(r.body))
			p := r.problem(t)
			require.Equal(t, c.typ, p.Type)
			require.Contains(t, p.Detail, c.detail)
			path, err := url.PathUnescape(strings.SplitN(c.req.path, "?", 2)[0])
			require.NoError(t, err)
			require.Equal(t, path, p.Instance)
		})
	}
	// None of the refused turn posts started a turn.
	var l api.HTTPItemList
	e.do(req{method: "GET", path: "/v1/threads/" + th.ID + "/items"}).decode(t, &l)
	require.Len(t, l.Data, 2)
}

func TestDrainingAnswers503(t *testing.T) {
	e := newEnv(t, envOpts{})
	th := e.createThread(nil, nil)
	e.drain.Start()
	for _, rq := range []req{
		{method: "GET", path: "/v1/threads"},
		{method: "POST", path: "/v1/threads/" + th.ID + "/turns", body: textInput("x")},
	} {
		r := e.do(rq)
		require.Equal(t, http.StatusServiceUnavailable, r.status)
		require.Equal(t, api.ProblemUnavailable, r.problem(t).Type)
		require.Equal(t, "5", r.header.Get("Retry-After"))
	}
}

func TestCORSThroughTheServersOriginGuard(t *testing.T) {
	// The server's origin guard answers preflights and refuses unknown
	// origins before the API sees the request.
	e := newEnv(t, envOpts{})
	r := e.do(req{method: "OPTIONS", path: "/v1/threads", header: http.Header{
		"Origin": {"https://evil.example"}, "Access-Control-Request-Method": {"POST"},
	}})
	require.Equal(t, http.StatusForbidden, r.status)
}

func TestCreateThreadSettingsAndReadBack(t *testing.T) {
	e := newEnv(t, envOpts{})
	dir := t.TempDir()
	th := e.createThread(map[string]any{
		"model": "other-model", "cwd": dir, "instructions": "Be brief.", "developerInstructions": "CI run 42.",
		"approvalPolicy": "never", "sandbox": "workspace-write", "dynamicTools": []any{weatherTool},
	}, nil)
	require.Equal(t, "other-model", *th.Model)
	require.Equal(t, dir, th.Cwd)
	// An empty body takes the defaults.
	r := e.do(req{method: "POST", path: "/v1/threads"})
	require.Equal(t, http.StatusCreated, r.status, string(r.body))

	var got api.HTTPThread
	g := e.do(req{method: "GET", path: "/v1/threads/" + th.ID})
	require.Equal(t, http.StatusOK, g.status)
	g.decode(t, &got)
	require.Equal(t, th.ID, got.Thread.ID)
	require.Equal(t, dir, got.Thread.Cwd)

	// The settings reach the model.
	_, turn := e.postTurn(th.ID, "?wait=true", textInput("hello"), nil, nil)
	require.Equal(t, api.TurnCompleted, turn.Status)
	body := string(e.fake.Requests()[0].Body)
	require.Contains(t, body, `"model":"other-model"`)
	require.Contains(t, body, "Be brief.")
	require.Contains(t, body, "CI run 42.")
	require.Contains(t, body, "lookup_weather")
}

// DELETE /v1/threads/{id} removes a thread with its transcript, even with a
// turn running; the thread is then unknown to every route, and a second
// delete is 404.
func TestDeleteThread(t *testing.T) {
	e := newEnv(t, envOpts{script: `{"steps":[{"text":"done"},{"match":{"user_text":"stall"},"fail":{"kind":"stall"}}]}`})
	th := e.createThread(nil, nil)
	_, turn := e.postTurn(th.ID, "?wait=true", textInput("hello"), nil, nil)
	require.Equal(t, api.TurnCompleted, turn.Status)
	r, running := e.postTurn(th.ID, "", textInput("stall"), nil, nil)
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	keep := e.createThread(nil, nil)

	d := e.do(req{method: "DELETE", path: "/v1/threads/" + th.ID})
	require.Equal(t, http.StatusNoContent, d.status, string(d.body))
	require.Empty(t, d.body)
	for _, path := range []string{"/v1/threads/" + th.ID, "/v1/threads/" + th.ID + "/items", "/v1/threads/" + th.ID + "/turns/" + running.ID} {
		require.Equal(t, http.StatusNotFound, e.do(req{method: "GET", path: path}).status, path)
	}
	_, err := e.st.GetThread(t.Context(), th.ID)
	require.Error(t, err, "gone from the store")
	again := e.do(req{method: "DELETE", path: "/v1/threads/" + th.ID})
	require.Equal(t, http.StatusNotFound, again.status)
	require.Equal(t, api.ProblemNotFound, again.problem(t).Type)
	require.Equal(t, http.StatusOK, e.do(req{method: "GET", path: "/v1/threads/" + keep.ID}).status, "other threads stay")
}
