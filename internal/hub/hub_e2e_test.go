package hub_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/model/fakemodel"
)

// The hub's rules for server→client requests (docs/protocol.md §7)
// driven through real turns: two clients on one thread, websockets and the
// HTTP API, the scripted fake model and real commands in a temp workspace.
// Approvals and user input go to every subscriber under one id and the
// first answer wins; dynamic tool calls go to one live client. Every wait
// is on a frame or an event, never on a sleep.

// hubPair starts the fake model with script, a daemon using it, and two
// websocket clients on one thread: a started it with params, b joined with
// thread/resume.
func hubPair(t *testing.T, script string, params map[string]any) (fake *fakemodel.Server, d *apptest.Daemon, a, b *apptest.Client, threadID string) {
	t.Helper()
	fake, d, a = apptest.StartWithFake(t, script)
	threadID = apptest.StartThread(t, a, params)
	b = d.RPC(t)
	b.Call("thread/resume", map[string]any{"threadId": threadID})
	a.Seen, b.Seen = nil, nil
	return fake, d, a, b, threadID
}

// TestHubApprovalFirstAnswerWins: two websocket clients on one thread both
// get the command's approval request under one id. The first answer is
// used; the other client is told the request is resolved, and its late,
// contrary answer changes nothing: the command runs once (accepted) or
// never (declined), and both connections stay usable.
func TestHubApprovalFirstAnswerWins(t *testing.T) {
	for _, tc := range []struct {
		name           string
		winnerIsB      bool // the client that joined with thread/resume answers first
		first, late    map[string]any
		status, output string
		runs           int
	}{
		{"accept by the joined client", true, apptest.Accept, apptest.Decline, "completed", "Exit code: 0", 1},
		{"decline by the starting client", false, apptest.Decline, apptest.Accept, "declined", "exec command rejected by user", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := apptest.Workspace(t)
			fake, _, a, b, threadID := hubPair(t, apptest.RunScript, apptest.ApprovalThread(ws))
			a.Call("turn/start", apptest.Input(threadID, "go"))

			reqA := a.UntilInTurn("item/commandExecution/requestApproval")
			reqB := b.UntilInTurn("item/commandExecution/requestApproval")
			require.NotEmpty(t, reqA.ID)
			require.JSONEq(t, string(reqA.ID), string(reqB.ID), "one request id for every client")
			require.JSONEq(t, string(reqA.Params), string(reqB.Params))

			winner, loser := a, b
			if tc.winnerIsB {
				winner, loser = b, a
			}
			winner.Reply(reqA.ID, tc.first)
			require.JSONEq(t, string(reqA.ID), string(apptest.Resolved(t, loser)), "the other client is told the request is settled")
			loser.Reply(reqA.ID, tc.late)

			for _, r := range []*apptest.Client{winner, loser} {
				require.Equal(t, "completed", apptest.TurnCompleted(t, r).Turn.Status)
				require.Equal(t, tc.status, apptest.CommandItem(t, r, "call_run").Status)
			}
			apptest.Sync(loser) // the late answer was read and did not break the connection
			require.Equal(t, tc.runs, apptest.Runs(t, ws))
			require.Len(t, fake.Requests(), 2, "the model was asked once more, with the command's output")
			require.Contains(t, apptest.ModelOutput(t, fake, 1, "call_run"), tc.output)
		})
	}
}

// hubPostApproval answers a request over HTTP and returns the status.
func hubPostApproval(t *testing.T, d *apptest.Daemon, threadID, requestID string, answer any) int {
	t.Helper()
	return d.Do(t, "POST", "/v1/threads/"+threadID+"/approvals/"+requestID, "", answer).StatusCode
}

// TestHubApprovalAcrossWebsocketAndHTTP: a websocket client and an HTTP
// client on one thread both see the approval request, under one id; the
// first answer wins whichever transport brings it. A websocket client that
// lost is told with serverRequest/resolved; an HTTP client that lost gets
// 409.
func TestHubApprovalAcrossWebsocketAndHTTP(t *testing.T) {
	for _, httpFirst := range []bool{true, false} {
		name := "websocket first"
		if httpFirst {
			name = "http first"
		}
		t.Run(name, func(t *testing.T) {
			ws := apptest.Workspace(t)
			fake, d, r := apptest.StartWithFake(t, apptest.RunScript)
			threadID := apptest.StartThread(t, r, apptest.ApprovalThread(ws))
			sse := d.OpenEvents(t, "/v1/threads/"+threadID+"/events", "")
			r.Call("turn/start", apptest.Input(threadID, "go"))

			req := r.UntilInTurn("item/commandExecution/requestApproval")
			ev := sse.Until("item/commandExecution/requestApproval")
			require.NotNil(t, ev.RequestID, "the event carries the id to answer")
			require.JSONEq(t, string(req.ID), *ev.RequestID, "one request id on both transports")
			require.JSONEq(t, string(req.Params), string(ev.Params))

			if httpFirst {
				require.Equal(t, http.StatusOK, hubPostApproval(t, d, threadID, *ev.RequestID, apptest.Accept))
				require.JSONEq(t, string(req.ID), string(apptest.Resolved(t, r)))
				r.Reply(req.ID, apptest.Decline) // too late: ignored
			} else {
				r.Reply(req.ID, apptest.Accept)
				var p struct {
					RequestID json.RawMessage `json:"requestId"`
				}
				require.NoError(t, json.Unmarshal(sse.Until("serverRequest/resolved").Params, &p))
				require.JSONEq(t, string(req.ID), string(p.RequestID))
				require.Equal(t, http.StatusConflict, hubPostApproval(t, d, threadID, *ev.RequestID, apptest.Decline))
			}

			require.Equal(t, "completed", apptest.TurnCompleted(t, r).Turn.Status)
			require.Equal(t, "completed", apptest.CommandItem(t, r, "call_run").Status)
			sse.Until("turn/completed")
			apptest.Sync(r)
			require.Equal(t, 1, apptest.Runs(t, ws), "the command ran once")
			require.Contains(t, apptest.ModelOutput(t, fake, 1, "call_run"), "Exit code: 0")
			require.Equal(t, http.StatusConflict, hubPostApproval(t, d, threadID, *ev.RequestID, apptest.Accept), "a settled request stays settled")
		})
	}
}

// TestHubApprovalReachesClientsThatJoinWhilePending: a websocket client
// and an HTTP client that subscribe while the approval is pending get it,
// under the id the first client holds; the newcomer's answer wins and the
// others are told.
func TestHubApprovalReachesClientsThatJoinWhilePending(t *testing.T) {
	ws := apptest.Workspace(t)
	fake, d, a := apptest.StartWithFake(t, apptest.RunScript)
	threadID := apptest.StartThread(t, a, apptest.ApprovalThread(ws))
	a.Call("turn/start", apptest.Input(threadID, "go"))
	req := a.UntilInTurn("item/commandExecution/requestApproval")

	c := d.RPC(t)
	c.Call("thread/resume", map[string]any{"threadId": threadID})
	reqC := c.UntilInTurn("item/commandExecution/requestApproval")
	require.JSONEq(t, string(req.ID), string(reqC.ID), "the pending request, not a new one")
	sse := d.OpenEvents(t, "/v1/threads/"+threadID+"/events", "")
	ev := sse.Until("item/commandExecution/requestApproval")
	require.NotNil(t, ev.RequestID)
	require.JSONEq(t, string(req.ID), *ev.RequestID)

	c.Reply(reqC.ID, apptest.Accept)
	require.JSONEq(t, string(req.ID), string(apptest.Resolved(t, a)))
	sse.Until("serverRequest/resolved")
	require.Equal(t, http.StatusConflict, hubPostApproval(t, d, threadID, *ev.RequestID, apptest.Decline))
	a.Reply(req.ID, apptest.Decline)

	require.Equal(t, "completed", apptest.TurnCompleted(t, a).Turn.Status)
	require.Equal(t, "completed", apptest.CommandItem(t, a, "call_run").Status)
	require.Equal(t, "completed", apptest.TurnCompleted(t, c).Turn.Status)
	apptest.Sync(a)
	require.Equal(t, 1, apptest.Runs(t, ws))
	require.Contains(t, apptest.ModelOutput(t, fake, 1, "call_run"), "Exit code: 0")
}

// TestHubUserInputFirstAnswerWins: request_user_input reaches both clients
// of the thread under one id; the model gets the first answer, the other
// client is told the request is resolved and its late answer is ignored.
func TestHubUserInputFirstAnswerWins(t *testing.T) {
	call := `{"call_id":"call_q","name":"request_user_input","arguments":{"questions":[{"id":"color","header":"Color","question":"Which color?","options":[{"label":"Red","description":"Warm."},{"label":"Blue","description":"Cool."}]}]}}`
	fake, _, a, b, threadID := hubPair(t, apptest.CallScript(`[`+call+`]`, "call_q", "noted"), nil)
	p := apptest.Input(threadID, "ask me")
	p["collaborationMode"] = map[string]any{"mode": "plan", "settings": map[string]any{"model": "fake-model", "reasoning_effort": nil, "developer_instructions": nil}}
	a.Call("turn/start", p)

	reqA := a.UntilInTurn("item/tool/requestUserInput")
	reqB := b.UntilInTurn("item/tool/requestUserInput")
	require.JSONEq(t, string(reqA.ID), string(reqB.ID), "one request id for every client")
	answer := func(color string) map[string]any {
		return map[string]any{"answers": map[string]any{"color": map[string]any{"answers": []string{color}}}}
	}
	b.Reply(reqB.ID, answer("Blue"))
	require.JSONEq(t, string(reqA.ID), string(apptest.Resolved(t, a)))
	a.Reply(reqA.ID, answer("Red"))

	require.Equal(t, "completed", apptest.TurnCompleted(t, a).Turn.Status)
	require.Equal(t, "completed", apptest.TurnCompleted(t, b).Turn.Status)
	apptest.Sync(a)
	require.Len(t, fake.Requests(), 2)
	require.JSONEq(t, `{"answers":{"color":{"answers":["Blue"]}}}`, apptest.ModelOutput(t, fake, 1, "call_q"))
}

// TestHubDynamicToolCallGoesToOneLiveClient: a registers the tool, b joins
// the thread and starts the turns. Turn 1: only a is offered the call, and
// its answer is used. Turn 2: when a disconnects, the call is offered to
// the one live client left (b); when b goes too, the call waits, and a
// reconnecting with thread/resume gets it again: its answer completes the
// turn.
func TestHubDynamicToolCallGoesToOneLiveClient(t *testing.T) {
	fake, d, a, b, threadID := hubPair(t, `{"steps":[
		{"match":{"user_text":"one"},"tool_calls":[{"call_id":"call_1","name":"lookup_weather","arguments":{"city":"Paris"}}]},
		{"match":{"call_output":"call_1"},"text":"first done"},
		{"match":{"user_text":"two"},"tool_calls":[{"call_id":"call_2","name":"lookup_weather","arguments":{"city":"Rome"}}]},
		{"match":{"call_output":"call_2"},"text":"second done"}]}`, map[string]any{"dynamicTools": []any{apptest.WeatherTool}})

	b.Call("turn/start", apptest.Input(threadID, "one"))
	id, p := apptest.ToolCall(t, a)
	require.Equal(t, "call_1", p.CallID)
	a.Reply(id, apptest.ToolAnswer("Sunny", true))
	require.Equal(t, "completed", apptest.TurnCompleted(t, a).Turn.Status)
	// Every offer of the call was made before it was settled, so before
	// turn/completed.
	require.Equal(t, "completed", apptest.TurnCompleted(t, b).Turn.Status)
	for _, f := range b.Seen {
		require.NotEqual(t, "item/tool/call", f.Method, "only one live client is offered the call")
	}
	require.Equal(t, "Sunny", apptest.ModelOutput(t, fake, 1, "call_1"))

	a.Seen, b.Seen = nil, nil
	b.Call("turn/start", apptest.Input(threadID, "two"))
	idA, p := apptest.ToolCall(t, a)
	require.Equal(t, "call_2", p.CallID)
	require.NoError(t, a.WS.Close(websocket.StatusNormalClosure, "bye"))
	idB, p := apptest.ToolCall(t, b)
	require.Equal(t, "call_2", p.CallID)
	require.NotEqual(t, string(idA), string(idB), "a new request on the other connection")
	require.NoError(t, b.WS.Close(websocket.StatusNormalClosure, "bye"))

	a2 := d.RPC(t)
	a2.Call("thread/resume", map[string]any{"threadId": threadID})
	id, p = apptest.ToolCall(t, a2)
	require.Equal(t, "call_2", p.CallID)
	require.JSONEq(t, `{"city":"Rome"}`, string(p.Arguments))
	a2.Reply(id, apptest.ToolAnswer("Rainy, from A", true))
	require.Equal(t, "completed", apptest.TurnCompleted(t, a2).Turn.Status)
	require.Equal(t, "Rainy, from A", apptest.ModelOutput(t, fake, 3, "call_2"))
	require.Equal(t, 2.0, apptest.Metrics(t, d.URL("/metrics"))[`appserver_dynamic_tool_calls_total{outcome="success"}`])
}

// TestHubDynamicToolCallWithHTTPRecorder: an HTTP client subscribed to the
// thread records the call but is not the live client: the websocket client
// that registered the tool gets the call; it disconnects mid-call, resumes
// the thread on a new connection, gets the call again and its answer
// completes the turn, which the HTTP stream shows settled.
func TestHubDynamicToolCallWithHTTPRecorder(t *testing.T) {
	fake, d := apptest.StartFakeDaemon(t, apptest.DynamicScript("call_w1", `{"city":"Paris"}`, "done"))
	a := d.RPC(t)
	threadID := apptest.StartThread(t, a, map[string]any{"dynamicTools": []any{apptest.WeatherTool}})
	sse := d.OpenEvents(t, "/v1/threads/"+threadID+"/events", "")
	a.Call("turn/start", apptest.Input(threadID, "weather?"))

	apptest.ToolCall(t, a)
	var shown struct {
		CallID string `json:"callId"`
	}
	require.NoError(t, json.Unmarshal(sse.Until(api.HTTPToolCallEventMethod).Params, &shown))
	require.Equal(t, "call_w1", shown.CallID)
	require.NoError(t, a.WS.Close(websocket.StatusNormalClosure, "bye"))

	a2 := d.RPC(t)
	a2.Call("thread/resume", map[string]any{"threadId": threadID})
	id, p := apptest.ToolCall(t, a2)
	require.Equal(t, "call_w1", p.CallID)
	a2.Reply(id, apptest.ToolAnswer("Sunny, from A", true))
	require.Equal(t, "completed", apptest.TurnCompleted(t, a2).Turn.Status)
	require.Equal(t, "Sunny, from A", apptest.ModelOutput(t, fake, 1, "call_w1"))

	var settled api.HTTPToolCallResolved
	require.NoError(t, json.Unmarshal(sse.Until(api.HTTPToolCallResolvedMethod).Params, &settled))
	require.Equal(t, "call_w1", settled.CallID)
	require.Equal(t, "success", settled.Outcome)
	sse.Until("turn/completed")
}
