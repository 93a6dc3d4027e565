package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/turns"
)

type requestResult struct {
	raw  json.RawMessage
	id   api.RequestID
	sent bool
	err  error
}

// ask makes a server request through the hub as a tool's turn does, on its
// own goroutine.
func ask(ctx context.Context, h *hub.Hub, threadID string) chan requestResult {
	out := make(chan requestResult, 1)
	go func() {
		raw, id, sent, err := h.Request(ctx, turns.ServerRequest{ThreadID: threadID, Method: "item/commandExecution/requestApproval", Params: api.CommandExecutionRequestApprovalParams{
			Kind: api.ApprovalKindCommand, ThreadID: threadID, TurnID: "turn-1", ItemID: "item-1",
		}})
		out <- requestResult{raw, id, sent, err}
	}()
	return out
}

func approvalEnv(t *testing.T, o envOpts) (*env, api.Thread, *stream) {
	t.Helper()
	e := newEnv(t, o)
	th := e.createThread(nil, nil)
	s, _ := e.openStream(th.ID, "?after=0", nil, nil)
	return e, th, s
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
	e, th, s := approvalEnv(t, envOpts{})
	res := ask(context.Background(), e.hub, th.ID)
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
	r := e.do(req{method: "POST", path: "/v1/threads/" + th.ID + "/approvals/999", body: `{"decision":"accept"}`})
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
	n, err := strconv.ParseInt(id, 10, 64)
	require.NoError(t, err)
	require.Equal(t, api.IntRequestID(n), got.id, "the turns layer announces the request's one id as resolved")

	r = e.do(req{method: "POST", path: path, body: `{"decision":"decline"}`})
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, api.ProblemConflict, r.problem(t).Type)
}

// Both transports get the approval, under one id; the first answer wins.
func TestApprovalAnsweredOnceAcrossTransports(t *testing.T) {
	for _, first := range []string{"http", "websocket"} {
		t.Run(first+" first", func(t *testing.T) {
			e, th, s := approvalEnv(t, envOpts{})
			ws := e.dialWS()
			ws.call("thread/resume", map[string]any{"threadId": th.ID})
			res := ask(context.Background(), e.hub, th.ID)
			id := requestID(t, s)
			wreq := ws.until("item/commandExecution/requestApproval")
			require.Equal(t, id, string(wreq.ID), "one request id on every transport")
			path := "/v1/threads/" + th.ID + "/approvals/" + id
			if first == "http" {
				r := e.do(req{method: "POST", path: path, body: `{"decision":"acceptForSession"}`})
				require.Equal(t, http.StatusOK, r.status, string(r.body))
				got := <-res
				require.JSONEq(t, `{"decision":"acceptForSession"}`, string(got.raw))
				// A late websocket answer changes nothing.
				ws.write(map[string]any{"id": wreq.ID, "result": map[string]any{"decision": "decline"}})
				return
			}
			ws.write(map[string]any{"id": wreq.ID, "result": map[string]any{"decision": "decline"}})
			got := <-res
			require.NoError(t, got.err)
			require.JSONEq(t, `{"decision":"decline"}`, string(got.raw))
			r := e.do(req{method: "POST", path: path, body: `{"decision":"accept"}`})
			require.Equal(t, http.StatusConflict, r.status)
		})
	}
}

func TestApprovalWaitEnds(t *testing.T) {
	t.Run("the turn ends", func(t *testing.T) {
		e, th, s := approvalEnv(t, envOpts{})
		ctx, cancel := context.WithCancel(context.Background())
		res := ask(ctx, e.hub, th.ID)
		id := requestID(t, s)
		cancel()
		got := <-res
		require.ErrorIs(t, got.err, context.Canceled)
		require.True(t, got.sent)
		r := e.do(req{method: "POST", path: "/v1/threads/" + th.ID + "/approvals/" + id, body: `{"decision":"accept"}`})
		require.Equal(t, http.StatusConflict, r.status)
	})
	t.Run("no client within the timeout", func(t *testing.T) {
		e := newEnv(t, envOpts{approval: hub.Timeouts{NoClient: 50 * time.Millisecond}})
		got := <-ask(context.Background(), e.hub, "01a2007c-e7fe-75b3-9b2c-d4ca854a9857")
		require.ErrorIs(t, got.err, turns.ErrNoClient)
		require.False(t, got.sent)
	})
}
