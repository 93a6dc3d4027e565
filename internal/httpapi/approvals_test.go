package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns"
)

// wsRequester stands in for the websocket's requester (the server's
// ClientRequests): absent answers ErrNoClient at once; otherwise the
// "client" holds the request until it answers (answer) or ctx ends.
type wsRequester struct {
	absent bool
	answer chan json.RawMessage
	got    chan struct{} // receives when the request reached the client
}

func (w *wsRequester) Request(ctx context.Context, _, _ string, _ any) (json.RawMessage, api.RequestID, bool, error) {
	if w.absent {
		return nil, api.RequestID{}, false, turns.ErrNoClient
	}
	w.got <- struct{}{}
	select {
	case raw := <-w.answer:
		return raw, api.IntRequestID(7), true, nil
	case <-ctx.Done():
		return nil, api.IntRequestID(7), true, ctx.Err()
	}
}

type requestResult struct {
	raw  json.RawMessage
	id   api.RequestID
	sent bool
	err  error
}

// ask makes a server request as a tool would, on its own goroutine.
func ask(ctx context.Context, q *Requests, threadID string) chan requestResult {
	out := make(chan requestResult, 1)
	go func() {
		raw, id, sent, err := q.Request(ctx, threadID, "item/commandExecution/requestApproval", api.CommandExecutionRequestApprovalParams{
			Kind: api.ApprovalKindCommand, ThreadID: threadID, TurnID: "turn-1", ItemID: "item-1",
		})
		out <- requestResult{raw, id, sent, err}
	}()
	return out
}

func approvalEnv(t *testing.T, ws *wsRequester, timeout time.Duration) (*env, *Requests, api.Thread, *stream) {
	t.Helper()
	q := NewRequests(ws, timeout)
	e := newEnv(t, envOpts{config: func(c *Config) { c.Requests = q }})
	th := e.createThread(nil, nil)
	s, _ := e.openStream(th.ID, "?after=0", nil, nil)
	return e, q, th, s
}

// requestID reads the request's event off the stream.
func requestID(t *testing.T, s *stream) string {
	t.Helper()
	evs := s.until("item/commandExecution/requestApproval")
	var ev api.HTTPEvent
	require.NoError(t, json.Unmarshal(evs[len(evs)-1].data, &ev))
	require.NotNil(t, ev.RequestID)
	var p api.CommandExecutionRequestApprovalParams
	require.NoError(t, json.Unmarshal(ev.Params, &p))
	require.Equal(t, "item-1", p.ItemID)
	return *ev.RequestID
}

func TestApprovalAnsweredOverHTTP(t *testing.T) {
	e, q, th, s := approvalEnv(t, &wsRequester{absent: true}, 0)
	res := ask(context.Background(), q, th.ID)
	id := requestID(t, s)
	path := "/v1/threads/" + th.ID + "/approvals/" + id

	// Bad answers are refused and leave the request pending.
	for body, detail := range map[string]string{
		`{"decision":"maybe"}`:                 "unknown variant",
		`{"decision":"accept","note":"x"}`:     `unknown field "note"`,
		`{}`:                                   "missing field decision",
		`["accept"]`:                           "must be a JSON object",
		`{"decision":"accept"} {"again":true}`: "must be a JSON object",
	} {
		r := e.do(req{method: "POST", path: path, body: body})
		require.Equal(t, http.StatusBadRequest, r.status, body)
		require.Contains(t, r.problem(t).Detail, detail, body)
	}
	r := e.do(req{method: "POST", path: "/v1/threads/" + th.ID + "/approvals/http-999", body: `{"decision":"accept"}`})
	require.Equal(t, http.StatusNotFound, r.status)

	r = e.do(req{method: "POST", path: path, body: `{"decision":"accept"}`})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var ok api.HTTPRequestAnswered
	r.decode(t, &ok)
	require.Equal(t, api.HTTPRequestAnswered{ThreadID: th.ID, RequestID: id}, ok)
	got := <-res
	require.NoError(t, got.err)
	require.JSONEq(t, `{"decision":"accept"}`, string(got.raw))
	require.True(t, got.sent)
	require.Equal(t, api.StringRequestID(id), got.id, "the turns layer announces the HTTP request as resolved")

	r = e.do(req{method: "POST", path: path, body: `{"decision":"decline"}`})
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, api.ProblemConflict, r.problem(t).Type)
}

func TestApprovalAnsweredOnceAcrossTransports(t *testing.T) {
	t.Run("http first", func(t *testing.T) {
		ws := &wsRequester{answer: make(chan json.RawMessage), got: make(chan struct{}, 1)}
		e, q, th, s := approvalEnv(t, ws, 0)
		res := ask(context.Background(), q, th.ID)
		id := requestID(t, s)
		<-ws.got
		r := e.do(req{method: "POST", path: "/v1/threads/" + th.ID + "/approvals/" + id, body: `{"decision":"acceptForSession"}`})
		require.Equal(t, http.StatusOK, r.status, string(r.body))
		got := <-res
		require.JSONEq(t, `{"decision":"acceptForSession"}`, string(got.raw))
		// The websocket client held it: its id is announced as resolved,
		// and the stream gets its own resolved for the HTTP id.
		require.Equal(t, api.IntRequestID(7), got.id)
		evs := s.until("serverRequest/resolved")
		var n api.ServerRequestResolvedNotification
		require.NoError(t, json.Unmarshal(evs[len(evs)-1].params, &n))
		require.Equal(t, api.StringRequestID(id), n.RequestID)
	})
	t.Run("websocket first", func(t *testing.T) {
		ws := &wsRequester{answer: make(chan json.RawMessage, 1), got: make(chan struct{}, 1)}
		e, q, th, s := approvalEnv(t, ws, 0)
		res := ask(context.Background(), q, th.ID)
		id := requestID(t, s)
		<-ws.got
		ws.answer <- json.RawMessage(`{"decision":"decline"}`)
		got := <-res
		require.JSONEq(t, `{"decision":"decline"}`, string(got.raw))
		require.Equal(t, api.IntRequestID(7), got.id)
		s.until("serverRequest/resolved")
		r := e.do(req{method: "POST", path: "/v1/threads/" + th.ID + "/approvals/" + id, body: `{"decision":"accept"}`})
		require.Equal(t, http.StatusConflict, r.status)
	})
}

func TestApprovalWaitEnds(t *testing.T) {
	t.Run("no answer within the timeout", func(t *testing.T) {
		_, q, th, s := approvalEnv(t, &wsRequester{absent: true}, 50*time.Millisecond)
		res := ask(context.Background(), q, th.ID)
		requestID(t, s)
		got := <-res
		require.ErrorIs(t, got.err, turns.ErrNoClient)
		require.True(t, got.sent)
	})
	t.Run("the turn ends", func(t *testing.T) {
		ws := &wsRequester{answer: make(chan json.RawMessage), got: make(chan struct{}, 1)}
		_, q, th, s := approvalEnv(t, ws, 0)
		ctx, cancel := context.WithCancel(context.Background())
		res := ask(ctx, q, th.ID)
		requestID(t, s)
		<-ws.got
		cancel()
		got := <-res
		require.ErrorIs(t, got.err, context.Canceled)
		require.Equal(t, api.IntRequestID(7), got.id)
	})
	t.Run("a thread without a log goes to the websocket only", func(t *testing.T) {
		ws := &wsRequester{absent: true}
		q := NewRequests(ws, 0)
		_ = newEnv(t, envOpts{config: func(c *Config) { c.Requests = q }})
		got := <-ask(context.Background(), q, "01a2007c-e7fe-75b3-9b2c-d4ca854a9857")
		require.ErrorIs(t, got.err, turns.ErrNoClient)
		require.False(t, got.sent)
	})
}
