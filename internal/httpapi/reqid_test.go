package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/frontdoor"
	"github.com/appserver/appserver/internal/logtest"
	"github.com/appserver/appserver/internal/principal"
)

// Every answer carries its request id (the client's when safe), problems
// repeat it, and the access log line names the principal the API
// authenticated.
func TestRequestIDs(t *testing.T) {
	var logs logtest.Buffer
	e := newEnv(t, envOpts{token: "op", principals: map[string]string{"alice": "alice-token"}, logs: &logs})

	r := e.do(req{method: "GET", path: "/v1/threads/nope", header: http.Header{"X-Request-Id": {"ci-job-1"}}})
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, "ci-job-1", r.header.Get("X-Request-Id"))
	require.Equal(t, "ci-job-1", r.problem(t).RequestID)

	for _, given := range []string{"", "has spaces", strings.Repeat("a", 200)} {
		hdr := http.Header{}
		if given != "" {
			hdr.Set("X-Request-Id", given)
		}
		r = e.do(req{method: "GET", path: "/v1/threads/nope", token: tok("wrong"), header: hdr})
		require.Equal(t, http.StatusUnauthorized, r.status)
		id := r.header.Get("X-Request-Id")
		_, err := uuid.Parse(id)
		require.NoError(t, err, "%q is replaced by a made id", given)
		require.Equal(t, id, r.problem(t).RequestID)
	}

	e.createThread(nil, tok("alice-token"))
	e.createThread(nil, nil)
	var lines []map[string]any
	require.Eventually(t, func() bool { lines = logs.Records(t, frontdoor.AccessLogMsg); return len(lines) == 6 }, 5*time.Second, time.Millisecond)
	require.Equal(t, principal.OperatorLogName, lines[0]["principal"])
	require.Equal(t, "/v1/threads/{threadID}", lines[0]["route"])
	require.Equal(t, 404.0, lines[0]["status"])
	require.Equal(t, "ci-job-1", lines[0]["request_id"])
	require.Equal(t, "", lines[1]["principal"], "refused: nobody")
	require.Equal(t, "alice", lines[4]["principal"])
	require.Equal(t, "POST", lines[4]["method"])
	require.Equal(t, "/v1/threads", lines[4]["route"])
	require.Equal(t, 201.0, lines[4]["status"])
	require.Equal(t, principal.OperatorLogName, lines[5]["principal"])
	require.NotContains(t, logs.String(), "alice-token")
}

// The turn a POST starts logs with the POST's request id: the API's line,
// the turn's start and its model request.
func TestRequestIDInTheTurnsLog(t *testing.T) {
	var logs logtest.Buffer
	e := newEnv(t, envOpts{script: `{"steps":[{"text":"hi"}]}`, logs: &logs})
	th := e.createThread(nil, nil)
	r, turn := e.postTurn(th.ID, "?wait=true", textInput("hello"), http.Header{"X-Request-Id": {"ci-turn-9"}}, nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, "ci-turn-9", r.header.Get("X-Request-Id"))

	for _, msg := range []string{frontdoor.AccessLogMsg, "turn started", "responses request"} {
		recs := logs.Records(t, msg)
		var ids []any
		for _, rec := range recs {
			ids = append(ids, rec["request_id"])
		}
		require.Contains(t, ids, "ci-turn-9", "%s: %v", msg, recs)
	}
	started := logs.Records(t, "turn started")
	require.Len(t, started, 1)
	require.Equal(t, turn.ID, started[0]["turn"])
	require.Equal(t, th.ID, started[0]["thread"])
	model := logs.Records(t, "responses request")
	require.Equal(t, turn.ID, model[0]["turn"])
	require.Equal(t, "fake", model[0]["provider"])
}
