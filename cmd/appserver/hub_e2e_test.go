package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model/fakemodel"
)

// The hub's rules for server→client requests (README, "Server requests")
// driven through real turns: two clients on one thread, websockets and the
// HTTP API, the scripted fake model and real commands in a temp workspace.
// Approvals and user input go to every subscriber under one id and the
// first answer wins; dynamic tool calls go to one live client. Every wait
// is on a frame or an event, never on a sleep.

// hubRunScript runs `echo run >> runs.txt` (which untrusted asks for), so
// the file's content counts how many times the command ran.
var hubRunScript = teCallScript(`[`+teShellCall("call_run", "echo run >> runs.txt")+`]`, "call_run", "done")

// hubPair starts the fake model with script, a daemon using it, and two
// websocket clients on one thread: a started it with params, b joined with
// thread/resume.
func hubPair(t *testing.T, script string, params map[string]any) (fake *fakemodel.Server, d *testDaemon, a, b *rpc, threadID string) {
	t.Helper()
	fake, d, a = teDaemon(t, script)
	threadID = startThread(t, a, params)
	b = newRPC(t, d)
	b.call("thread/resume", map[string]any{"threadId": threadID})
	a.seen, b.seen = nil, nil
	return fake, d, a, b, threadID
}

// hubUntil waits on r for a frame with method, failing if the turn
// completes first.
func hubUntil(t *testing.T, r *rpc, method string) frame {
	t.Helper()
	for i, f := range r.seen {
		if f.Method == method {
			r.seen = append(r.seen[:i:i], r.seen[i+1:]...)
			return f
		}
		require.NotEqual(t, "turn/completed", f.Method, "the turn completed before %s", method)
	}
	for {
		f, err := r.read(15 * time.Second)
		require.NoError(t, err, "waiting for %s", method)
		if f.Method == method {
			return f
		}
		require.NotEqual(t, "turn/completed", f.Method, "the turn completed before %s", method)
		r.seen = append(r.seen, f)
	}
}

// hubResolved waits on r for serverRequest/resolved before the turn
// completes and returns its requestId.
func hubResolved(t *testing.T, r *rpc) json.RawMessage {
	t.Helper()
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	require.NoError(t, json.Unmarshal(hubUntil(t, r, "serverRequest/resolved").Params, &p))
	return p.RequestID
}

// hubCommandItem returns the completed commandExecution item of callID
// among the frames r recorded.
func hubCommandItem(t *testing.T, r *rpc, callID string) teItem {
	t.Helper()
	it, ok := teItems(t, r.seen, "completed")[callID]
	require.True(t, ok, "no item/completed for %s", callID)
	return it
}

// hubRuns returns how many times the command of hubRunScript ran in ws.
func hubRuns(t *testing.T, ws string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, "runs.txt"))
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	return strings.Count(string(b), "run\n")
}

// hubApprovalThread is a thread whose commands need approval.
func hubApprovalThread(ws string) map[string]any {
	return map[string]any{"cwd": ws, "approvalPolicy": "untrusted", "sandbox": "workspace-write"}
}

var (
	hubAccept  = map[string]any{"decision": "accept"}
	hubDecline = map[string]any{"decision": "decline"}
)

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
		{"accept by the joined client", true, hubAccept, hubDecline, "completed", "Exit code: 0", 1},
		{"decline by the starting client", false, hubDecline, hubAccept, "declined", "exec command rejected by user", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := teWorkspace(t)
			fake, _, a, b, threadID := hubPair(t, hubRunScript, hubApprovalThread(ws))
			a.call("turn/start", teInput(threadID, "go"))

			reqA := hubUntil(t, a, "item/commandExecution/requestApproval")
			reqB := hubUntil(t, b, "item/commandExecution/requestApproval")
			require.NotEmpty(t, reqA.ID)
			require.JSONEq(t, string(reqA.ID), string(reqB.ID), "one request id for every client")
			require.JSONEq(t, string(reqA.Params), string(reqB.Params))

			winner, loser := a, b
			if tc.winnerIsB {
				winner, loser = b, a
			}
			winner.reply(reqA.ID, tc.first)
			require.JSONEq(t, string(reqA.ID), string(hubResolved(t, loser)), "the other client is told the request is settled")
			loser.reply(reqA.ID, tc.late)

			for _, r := range []*rpc{winner, loser} {
				require.Equal(t, "completed", dlTurnCompleted(t, r).Turn.Status)
				require.Equal(t, tc.status, hubCommandItem(t, r, "call_run").Status)
			}
			dlSync(loser) // the late answer was read and did not break the connection
			require.Equal(t, tc.runs, hubRuns(t, ws))
			require.Len(t, fake.Requests(), 2, "the model was asked once more, with the command's output")
			require.Contains(t, teModelOutput(t, fake, 1, "call_run"), tc.output)
		})
	}
}

// hubSSE reads a thread's HTTP event stream.
type hubSSE struct {
	t      *testing.T
	events chan api.HTTPEvent // closed when the stream ends
}

// hubEvents opens the thread's event stream; once it returns, the HTTP
// API's event log is subscribed to the thread. The stream is read on a
// goroutine that ends when the test closes the stream.
func hubEvents(t *testing.T, d *testDaemon, threadID string) *hubSSE {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", d.httpURL("/v1/threads/"+threadID+"/events"), nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	s := &hubSSE{t: t, events: make(chan api.HTTPEvent, 256)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(s.events)
		sc := bufioScanner(resp)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev api.HTTPEvent
			if json.Unmarshal([]byte(data), &ev) != nil {
				ev.Method = "undecodable: " + data
			}
			select {
			case s.events <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return s
}

// until reads events until one with method, failing if the turn completes
// first (unless method is turn/completed).
func (s *hubSSE) until(method string) api.HTTPEvent {
	s.t.Helper()
	timeout := time.NewTimer(15 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case ev, ok := <-s.events:
			require.True(s.t, ok, "the event stream ended before %s", method)
			if ev.Method == method {
				return ev
			}
			require.NotEqual(s.t, "turn/completed", ev.Method, "the turn completed before %s", method)
		case <-timeout.C:
			s.t.Fatalf("no %s on the event stream", method)
		}
	}
}

// hubPostApproval answers a request over HTTP and returns the status.
func hubPostApproval(t *testing.T, d *testDaemon, threadID, requestID string, answer any) int {
	t.Helper()
	return httpDo(t, d, "POST", "/v1/threads/"+threadID+"/approvals/"+requestID, "", answer).StatusCode
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
			ws := teWorkspace(t)
			fake, d, r := teDaemon(t, hubRunScript)
			threadID := startThread(t, r, hubApprovalThread(ws))
			sse := hubEvents(t, d, threadID)
			r.call("turn/start", teInput(threadID, "go"))

			req := hubUntil(t, r, "item/commandExecution/requestApproval")
			ev := sse.until("item/commandExecution/requestApproval")
			require.NotNil(t, ev.RequestID, "the event carries the id to answer")
			require.JSONEq(t, string(req.ID), *ev.RequestID, "one request id on both transports")
			require.JSONEq(t, string(req.Params), string(ev.Params))

			if httpFirst {
				require.Equal(t, http.StatusOK, hubPostApproval(t, d, threadID, *ev.RequestID, hubAccept))
				require.JSONEq(t, string(req.ID), string(hubResolved(t, r)))
				r.reply(req.ID, hubDecline) // too late: ignored
			} else {
				r.reply(req.ID, hubAccept)
				var p struct {
					RequestID json.RawMessage `json:"requestId"`
				}
				require.NoError(t, json.Unmarshal(sse.until("serverRequest/resolved").Params, &p))
				require.JSONEq(t, string(req.ID), string(p.RequestID))
				require.Equal(t, http.StatusConflict, hubPostApproval(t, d, threadID, *ev.RequestID, hubDecline))
			}

			require.Equal(t, "completed", dlTurnCompleted(t, r).Turn.Status)
			require.Equal(t, "completed", hubCommandItem(t, r, "call_run").Status)
			sse.until("turn/completed")
			dlSync(r)
			require.Equal(t, 1, hubRuns(t, ws), "the command ran once")
			require.Contains(t, teModelOutput(t, fake, 1, "call_run"), "Exit code: 0")
			require.Equal(t, http.StatusConflict, hubPostApproval(t, d, threadID, *ev.RequestID, hubAccept), "a settled request stays settled")
		})
	}
}

// TestHubApprovalReachesClientsThatJoinWhilePending: a websocket client
// and an HTTP client that subscribe while the approval is pending get it,
// under the id the first client holds; the newcomer's answer wins and the
// others are told.
func TestHubApprovalReachesClientsThatJoinWhilePending(t *testing.T) {
	ws := teWorkspace(t)
	fake, d, a := teDaemon(t, hubRunScript)
	threadID := startThread(t, a, hubApprovalThread(ws))
	a.call("turn/start", teInput(threadID, "go"))
	req := hubUntil(t, a, "item/commandExecution/requestApproval")

	c := newRPC(t, d)
	c.call("thread/resume", map[string]any{"threadId": threadID})
	reqC := hubUntil(t, c, "item/commandExecution/requestApproval")
	require.JSONEq(t, string(req.ID), string(reqC.ID), "the pending request, not a new one")
	sse := hubEvents(t, d, threadID)
	ev := sse.until("item/commandExecution/requestApproval")
	require.NotNil(t, ev.RequestID)
	require.JSONEq(t, string(req.ID), *ev.RequestID)

	c.reply(reqC.ID, hubAccept)
	require.JSONEq(t, string(req.ID), string(hubResolved(t, a)))
	sse.until("serverRequest/resolved")
	require.Equal(t, http.StatusConflict, hubPostApproval(t, d, threadID, *ev.RequestID, hubDecline))
	a.reply(req.ID, hubDecline)

	require.Equal(t, "completed", dlTurnCompleted(t, a).Turn.Status)
	require.Equal(t, "completed", hubCommandItem(t, a, "call_run").Status)
	require.Equal(t, "completed", dlTurnCompleted(t, c).Turn.Status)
	dlSync(a)
	require.Equal(t, 1, hubRuns(t, ws))
	require.Contains(t, teModelOutput(t, fake, 1, "call_run"), "Exit code: 0")
}

// TestHubUserInputFirstAnswerWins: request_user_input reaches both clients
// of the thread under one id; the model gets the first answer, the other
// client is told the request is resolved and its late answer is ignored.
func TestHubUserInputFirstAnswerWins(t *testing.T) {
	call := `{"call_id":"call_q","name":"request_user_input","arguments":{"questions":[{"id":"color","header":"Color","question":"Which color?","options":[{"label":"Red","description":"Warm."},{"label":"Blue","description":"Cool."}]}]}}`
	fake, _, a, b, threadID := hubPair(t, teCallScript(`[`+call+`]`, "call_q", "noted"), nil)
	p := teInput(threadID, "ask me")
	p["collaborationMode"] = map[string]any{"mode": "plan", "settings": map[string]any{"model": "fake-model", "reasoning_effort": nil, "developer_instructions": nil}}
	a.call("turn/start", p)

	reqA := hubUntil(t, a, "item/tool/requestUserInput")
	reqB := hubUntil(t, b, "item/tool/requestUserInput")
	require.JSONEq(t, string(reqA.ID), string(reqB.ID), "one request id for every client")
	answer := func(color string) map[string]any {
		return map[string]any{"answers": map[string]any{"color": map[string]any{"answers": []string{color}}}}
	}
	b.reply(reqB.ID, answer("Blue"))
	require.JSONEq(t, string(reqA.ID), string(hubResolved(t, a)))
	a.reply(reqA.ID, answer("Red"))

	require.Equal(t, "completed", dlTurnCompleted(t, a).Turn.Status)
	require.Equal(t, "completed", dlTurnCompleted(t, b).Turn.Status)
	dlSync(a)
	require.Len(t, fake.Requests(), 2)
	require.JSONEq(t, `{"answers":{"color":{"answers":["Blue"]}}}`, teModelOutput(t, fake, 1, "call_q"))
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
		{"match":{"call_output":"call_2"},"text":"second done"}]}`, map[string]any{"dynamicTools": []any{weatherTool}})

	b.call("turn/start", teInput(threadID, "one"))
	id, p := dlToolCall(t, a)
	require.Equal(t, "call_1", p.CallID)
	a.reply(id, dlAnswer("Sunny", true))
	require.Equal(t, "completed", dlTurnCompleted(t, a).Turn.Status)
	// Every offer of the call was made before it was settled, so before
	// turn/completed.
	require.Equal(t, "completed", dlTurnCompleted(t, b).Turn.Status)
	for _, f := range b.seen {
		require.NotEqual(t, "item/tool/call", f.Method, "only one live client is offered the call")
	}
	require.Equal(t, "Sunny", dlModelOutput(t, fake, 1, "call_1"))

	a.seen, b.seen = nil, nil
	b.call("turn/start", teInput(threadID, "two"))
	idA, p := dlToolCall(t, a)
	require.Equal(t, "call_2", p.CallID)
	require.NoError(t, a.ws.Close(websocket.StatusNormalClosure, "bye"))
	idB, p := dlToolCall(t, b)
	require.Equal(t, "call_2", p.CallID)
	require.NotEqual(t, string(idA), string(idB), "a new request on the other connection")
	require.NoError(t, b.ws.Close(websocket.StatusNormalClosure, "bye"))

	a2 := newRPC(t, d)
	a2.call("thread/resume", map[string]any{"threadId": threadID})
	id, p = dlToolCall(t, a2)
	require.Equal(t, "call_2", p.CallID)
	require.JSONEq(t, `{"city":"Rome"}`, string(p.Arguments))
	a2.reply(id, dlAnswer("Rainy, from A", true))
	require.Equal(t, "completed", dlTurnCompleted(t, a2).Turn.Status)
	require.Equal(t, "Rainy, from A", dlModelOutput(t, fake, 3, "call_2"))
	require.Equal(t, 2.0, dlOutcome(t, d, "success"))
}

// TestHubDynamicToolCallWithHTTPRecorder: an HTTP client subscribed to the
// thread records the call but is not the live client: the websocket client
// that registered the tool gets the call; it disconnects mid-call, resumes
// the thread on a new connection, gets the call again and its answer
// completes the turn, which the HTTP stream shows settled.
func TestHubDynamicToolCallWithHTTPRecorder(t *testing.T) {
	fake, d := dlSetup(t, dlScript("call_w1", `{"city":"Paris"}`, "done"))
	a := newRPC(t, d)
	threadID := startThread(t, a, map[string]any{"dynamicTools": []any{weatherTool}})
	sse := hubEvents(t, d, threadID)
	a.call("turn/start", teInput(threadID, "weather?"))

	dlToolCall(t, a)
	var shown struct {
		CallID string `json:"callId"`
	}
	require.NoError(t, json.Unmarshal(sse.until(api.HTTPToolCallEventMethod).Params, &shown))
	require.Equal(t, "call_w1", shown.CallID)
	require.NoError(t, a.ws.Close(websocket.StatusNormalClosure, "bye"))

	a2 := newRPC(t, d)
	a2.call("thread/resume", map[string]any{"threadId": threadID})
	id, p := dlToolCall(t, a2)
	require.Equal(t, "call_w1", p.CallID)
	a2.reply(id, dlAnswer("Sunny, from A", true))
	require.Equal(t, "completed", dlTurnCompleted(t, a2).Turn.Status)
	require.Equal(t, "Sunny, from A", dlModelOutput(t, fake, 1, "call_w1"))

	var settled api.HTTPToolCallResolved
	require.NoError(t, json.Unmarshal(sse.until(api.HTTPToolCallResolvedMethod).Params, &settled))
	require.Equal(t, "call_w1", settled.CallID)
	require.Equal(t, "success", settled.Outcome)
	sse.until("turn/completed")
}
