package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
)

func (e *env) queue(threadID string, token *string) []api.QueuedSubmission {
	e.t.Helper()
	r := e.do(req{method: "GET", path: "/v1/threads/" + threadID + "/queue", token: token})
	require.Equal(e.t, http.StatusOK, r.status, string(r.body))
	var res api.ThreadQueueListResult
	require.NoError(e.t, json.Unmarshal(r.body, &res))
	return res.Data
}

func (e *env) queueAdd(threadID, clientID, text string) api.QueuedSubmission {
	e.t.Helper()
	body := textInput(text)
	body["clientUserMessageId"] = clientID
	r := e.do(req{method: "POST", path: "/v1/threads/" + threadID + "/queue", body: body})
	require.Equal(e.t, http.StatusOK, r.status, string(r.body))
	var res api.ThreadQueueAddResult
	require.NoError(e.t, json.Unmarshal(r.body, &res))
	require.Equal(e.t, "/v1/threads/"+threadID+"/queue/"+res.QueuedSubmission.ID, r.header.Get("Location"))
	return res.QueuedSubmission
}

// TestQueueOverHTTP: the thread's queue under /v1/threads/{id}/queue, as
// thread/queue/* serves it: add (a repeated client id adds nothing),
// list, order, update, delete, start; an interrupted turn leaves the
// queue waiting, a completed one moves it on; another principal sees no
// queue of the thread.
func TestQueueOverHTTP(t *testing.T) {
	e := newEnv(t, envOpts{token: "op", principals: map[string]string{"alice": "alice-token"}, script: `{"steps":[
		{"match":{"user_text":"first"},"text":"never finished","chunks":4,"fail":{"kind":"stall","after_events":4}},
		{"match":{"user_text":"queued two"},"text":"two done"},
		{"match":{"user_text":"queued one"},"text":"one done"}]}`})
	th := e.createThread(nil, nil)
	r, first := e.postTurn(th.ID, "", textInput("first"), nil, nil)
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))

	one := e.queueAdd(th.ID, "c1", "queued one")
	two := e.queueAdd(th.ID, "c2", "queued two")
	require.Equal(t, one, e.queueAdd(th.ID, "c1", "queued one"), "a repeated client id answers the first entry")
	require.Len(t, e.queue(th.ID, nil), 2)
	base := "/v1/threads/" + th.ID + "/queue"

	r = e.do(req{method: "PUT", path: base, body: map[string]any{"queuedSubmissionIds": []string{two.ID}}})
	require.Equal(t, http.StatusBadRequest, r.status, string(r.body))
	require.Equal(t, "queue reorder must include every queued submission exactly once", r.problem(t).Detail)
	r = e.do(req{method: "PUT", path: base, body: map[string]any{"queuedSubmissionIds": []string{two.ID, one.ID}}})
	require.Equal(t, http.StatusNoContent, r.status, string(r.body))
	r = e.do(req{method: "PATCH", path: base + "/" + two.ID, body: map[string]any{"input": []any{map[string]any{"type": "text", "text": "queued two"}}, "responsesapiClientMetadata": map[string]string{"k": "v"}}})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	r = e.do(req{method: "PATCH", path: base + "/nope", body: textInput("x")})
	require.Equal(t, http.StatusNotFound, r.status, string(r.body))
	r = e.do(req{method: "DELETE", path: base + "/nope"})
	require.Equal(t, http.StatusNotFound, r.status, string(r.body))
	r = e.do(req{method: "POST", path: base, body: map[string]any{"clientUserMessageId": "c3", "input": []any{}}})
	require.Equal(t, http.StatusBadRequest, r.status, string(r.body))
	got := e.queue(th.ID, nil)
	require.Equal(t, []string{two.ID, one.ID}, []string{got[0].ID, got[1].ID})
	require.Equal(t, map[string]string{"k": "v"}, got[0].ResponsesapiClientMetadata)

	// Another principal: no such thread.
	r = e.do(req{method: "GET", path: base, token: tok("alice-token")})
	require.Equal(t, http.StatusNotFound, r.status, string(r.body))
	r = e.do(req{method: "POST", path: base + "/" + one.ID + "/start", token: tok("alice-token")})
	require.Equal(t, http.StatusNotFound, r.status, string(r.body))

	// A running turn: no start.
	r = e.do(req{method: "POST", path: base + "/" + two.ID + "/start"})
	require.Equal(t, http.StatusBadRequest, r.status, string(r.body))
	require.Equal(t, "thread already has an active or pending turn", r.problem(t).Detail)

	r = e.do(req{method: "POST", path: "/v1/threads/" + th.ID + "/turns/" + first.ID + "/interrupt?wait=true"})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Len(t, e.queue(th.ID, nil), 2, "an interrupted turn leaves the queue waiting")

	r = e.do(req{method: "POST", path: base + "/" + two.ID + "/start"})
	require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, r.status, string(r.body))
	var turn api.HTTPTurn
	require.NoError(t, json.Unmarshal(r.body, &turn))
	require.Equal(t, "/v1/threads/"+th.ID+"/turns/"+turn.ID, r.header.Get("Location"))
	r = e.do(req{method: "GET", path: "/v1/threads/" + th.ID + "/turns/" + turn.ID + "?wait=true"})
	require.NoError(t, json.Unmarshal(r.body, &turn))
	require.Equal(t, "two done", *turn.FinalMessage)

	// Its completion moves the queue on: "queued one" runs by itself.
	deadline := time.Now().Add(20 * time.Second)
	for len(e.queue(th.ID, nil)) > 0 {
		require.True(t, time.Now().Before(deadline), "the queue did not move on")
		time.Sleep(20 * time.Millisecond)
	}
	r = e.do(req{method: "POST", path: base + "/" + one.ID + "/start"})
	require.Equal(t, http.StatusNotFound, r.status, "an entry that became a turn is gone: %s", r.body)
}
