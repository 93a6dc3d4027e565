package dynamic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// Lifecycle tests of client-registered (dynamic) tools over real
// websockets: an in-process daemon with the embedded store, the scripted
// fake model, and test clients that answer item/tool/call. Every wait is on
// a frame the daemon sends (never a sleep); rpc.read bounds each wait.

// dlItem is a dynamicToolCall item as notifications carry it.
type dlItem struct {
	Type         string           `json:"type"`
	ID           string           `json:"id"`
	Tool         string           `json:"tool"`
	Status       string           `json:"status"`
	ContentItems []map[string]any `json:"contentItems"`
	Success      *bool            `json:"success"`
	DurationMs   *int64           `json:"durationMs"`
}

// dlDynamicCompleted waits for item/completed of a dynamicToolCall item.
func dlDynamicCompleted(t *testing.T, r *apptest.Client) dlItem {
	t.Helper()
	for {
		f := r.Until("item/completed")
		var p struct {
			Item dlItem `json:"item"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &p))
		if p.Item.Type == "dynamicToolCall" {
			return p.Item
		}
	}
}

// dlMetric is the sample name{labels} of the daemon's /metrics (labels in
// the exposition's order, e.g. `outcome="success"`), 0 when absent.
func dlMetric(t *testing.T, d *apptest.Daemon, name, labels string) float64 {
	t.Helper()
	if labels != "" {
		name += "{" + labels + "}"
	}
	return apptest.Metrics(t, d.URL("/metrics"))[name]
}

func dlOutcome(t *testing.T, d *apptest.Daemon, outcome string) float64 {
	return dlMetric(t, d, "appserver_dynamic_tool_calls_total", `outcome="`+outcome+`"`)
}

func dlIgnored(t *testing.T, d *apptest.Daemon, reason string) float64 {
	return dlMetric(t, d, "appserver_dynamic_tool_ignored_answers_total", `reason="`+reason+`"`)
}

func dlPending(t *testing.T, d *apptest.Daemon) float64 {
	return dlMetric(t, d, "appserver_dynamic_tool_calls_pending", "")
}

// TestDynamicLifecycleClientAnswers covers the four kinds of answer: a
// success, success:false, a JSON-RPC error and an undecodable result. Each
// becomes the model's function output and the turn goes on.
func TestDynamicLifecycleClientAnswers(t *testing.T) {
	type answer struct {
		result any    // the result to send, or
		raw    string // a raw frame, %s = the request id
	}
	for _, tc := range []struct {
		name        string
		answer      answer
		wantStatus  string
		wantSuccess bool
		wantText    string
		outcome     string
	}{
		{"success", answer{result: apptest.ToolAnswer("Sunny, 21C", true)}, "completed", true, "Sunny, 21C", "success"},
		{"failure", answer{result: apptest.ToolAnswer("no such city", false)}, "failed", false, "no such city", "failure"},
		{"rpc_error", answer{raw: `{"id":%s,"error":{"code":-32000,"message":"tool exploded"}}`}, "failed", false, "dynamic tool request failed", "client_error"},
		{"invalid_result", answer{raw: `{"id":%s,"result":{"contentItems":"not a list"}}`}, "failed", false, "dynamic tool response was invalid", "invalid_response"},
		{"result_without_success", answer{raw: `{"id":%s,"result":{"contentItems":[]}}`}, "failed", false, "dynamic tool response was invalid", "invalid_response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, d := apptest.StartFakeDaemon(t, apptest.DynamicScript("call_w1", `{"city":"Paris"}`, "The turn went on."))
			r := d.RPC(t)
			threadID := apptest.StartThread(t, r, map[string]any{"dynamicTools": []any{apptest.WeatherTool}})
			turnID := apptest.StartTurn(t, r, threadID, "weather?")

			id, p := apptest.ToolCall(t, r)
			require.Equal(t, apptest.ToolCallParams{ThreadID: threadID, TurnID: turnID, CallID: "call_w1", Tool: "lookup_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}, p)
			if tc.answer.raw != "" {
				require.NoError(t, r.WS.Write(context.Background(), websocket.MessageText, fmt.Appendf(nil, tc.answer.raw, id)))
			} else {
				r.Reply(id, tc.answer.result)
			}

			item := dlDynamicCompleted(t, r)
			require.Equal(t, "call_w1", item.ID)
			require.Equal(t, tc.wantStatus, item.Status)
			require.NotNil(t, item.Success)
			require.Equal(t, tc.wantSuccess, *item.Success)
			require.Equal(t, []map[string]any{{"type": "inputText", "text": tc.wantText}}, item.ContentItems)
			require.NotNil(t, item.DurationMs)

			tr := apptest.TurnCompleted(t, r)
			require.Equal(t, "completed", tr.Turn.Status, "the turn continues after the tool's answer")
			require.Equal(t, "The turn went on.", tr.Turn.Items[0].Text)
			require.Equal(t, tc.wantText, apptest.ModelOutput(t, fake, 1, "call_w1"))
			require.Equal(t, 1.0, dlOutcome(t, d, tc.outcome))
			require.Equal(t, 0.0, dlPending(t, d))
		})
	}
}

// TestDynamicLifecycleIgnoredAnswers: a second answer to the same request
// and an answer to a request id the daemon never sent are ignored and
// counted; the first answer is the one the model gets.
func TestDynamicLifecycleIgnoredAnswers(t *testing.T) {
	fake, d := apptest.StartFakeDaemon(t, apptest.DynamicScript("call_w1", `{"city":"Paris"}`, "ok"))
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, map[string]any{"dynamicTools": []any{apptest.WeatherTool}})
	apptest.StartTurn(t, r, threadID, "weather?")

	id, _ := apptest.ToolCall(t, r)
	r.Reply(id, apptest.ToolAnswer("first", true))
	r.Reply(id, apptest.ToolAnswer("second", true))
	r.Send(map[string]any{"id": 987654321, "result": apptest.ToolAnswer("unknown", true)})

	item := dlDynamicCompleted(t, r)
	require.Equal(t, []map[string]any{{"type": "inputText", "text": "first"}}, item.ContentItems)
	require.Equal(t, "completed", apptest.TurnCompleted(t, r).Turn.Status)
	require.Equal(t, "first", apptest.ModelOutput(t, fake, 1, "call_w1"))

	apptest.Sync(r)
	require.Equal(t, 1.0, dlIgnored(t, d, "duplicate"))
	require.Equal(t, 1.0, dlIgnored(t, d, "unknown_call"))
	require.Equal(t, 1.0, dlOutcome(t, d, "success"))
}

// TestDynamicLifecycleInvalidArguments: arguments that violate the
// registered schema go back to the model as a tool error; the client never
// sees that call. The model's corrected call is forwarded.
func TestDynamicLifecycleInvalidArguments(t *testing.T) {
	fake, d := apptest.StartFakeDaemon(t, `{"steps":[
		{"tool_calls":[{"call_id":"call_bad","name":"lookup_weather","arguments":{"town":"Paris"}}]},
		{"match":{"call_output":"call_bad"},"tool_calls":[{"call_id":"call_good","name":"lookup_weather","arguments":{"city":"Paris"}}]},
		{"match":{"call_output":"call_good"},"text":"Sunny."}]}`)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, map[string]any{"dynamicTools": []any{apptest.WeatherTool}})
	r.Methods()
	apptest.StartTurn(t, r, threadID, "weather?")

	id, p := apptest.ToolCall(t, r)
	require.Equal(t, "call_good", p.CallID, "the invalid call is not forwarded")
	// Nothing about call_bad reached the client before the good call.
	for _, f := range r.Seen {
		require.NotContains(t, string(f.Params), "call_bad", f.Method)
	}
	r.Reply(id, apptest.ToolAnswer("Sunny, 21C", true))
	require.Equal(t, "completed", apptest.TurnCompleted(t, r).Turn.Status)
	for _, f := range r.Seen {
		require.NotContains(t, string(f.Params), "call_bad", f.Method)
	}

	out := apptest.ModelOutput(t, fake, 1, "call_bad")
	require.True(t, strings.HasPrefix(out, "invalid arguments for lookup_weather: "), out)
	require.Contains(t, out, "city")
	require.Equal(t, "Sunny, 21C", apptest.ModelOutput(t, fake, 2, "call_good"))
	require.Equal(t, 1.0, dlOutcome(t, d, "invalid_arguments"))
	require.Equal(t, 1.0, dlOutcome(t, d, "success"))
}

// TestDynamicLifecycleInterrupt: interrupting the turn while the client
// holds the call completes the turn as interrupted, tells the client the
// request is resolved, and ignores (counts) a late answer.
func TestDynamicLifecycleInterrupt(t *testing.T) {
	_, d := apptest.StartFakeDaemon(t, apptest.DynamicScript("call_w1", `{"city":"Paris"}`, "never"))
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, map[string]any{"dynamicTools": []any{apptest.WeatherTool}})
	turnID := apptest.StartTurn(t, r, threadID, "weather?")
	id, _ := apptest.ToolCall(t, r)

	r.Call("turn/interrupt", map[string]any{"threadId": threadID, "turnId": turnID})
	item := dlDynamicCompleted(t, r)
	require.Equal(t, "failed", item.Status)
	require.Equal(t, []map[string]any{}, item.ContentItems)
	require.Equal(t, "interrupted", apptest.TurnCompleted(t, r).Turn.Status)

	var resolved struct {
		ThreadID  string          `json:"threadId"`
		RequestID json.RawMessage `json:"requestId"`
	}
	require.NoError(t, json.Unmarshal(r.Until("serverRequest/resolved").Params, &resolved))
	require.Equal(t, threadID, resolved.ThreadID)
	require.JSONEq(t, string(id), string(resolved.RequestID))

	r.Reply(id, apptest.ToolAnswer("too late", true))
	apptest.Sync(r)
	require.Equal(t, 1.0, dlIgnored(t, d, "duplicate"))
	require.Equal(t, 1.0, dlOutcome(t, d, "cancelled"))
	require.Equal(t, 0.0, dlPending(t, d))

	// The thread is usable again and the late answer changed nothing.
	items := string(r.Call("thread/items/list", map[string]any{"threadId": threadID}))
	require.NotContains(t, items, "too late")
}

// TestDynamicLifecycleDisconnectReoffersToSubscriber: the holder of a call
// disconnects; another subscribed connection gets the call and answers.
func TestDynamicLifecycleDisconnectReoffersToSubscriber(t *testing.T) {
	fake, d := apptest.StartFakeDaemon(t, apptest.DynamicScript("call_w1", `{"city":"Paris"}`, "done"))
	a := d.RPC(t)
	threadID := apptest.StartThread(t, a, map[string]any{"dynamicTools": []any{apptest.WeatherTool}})
	b := d.RPC(t)
	b.Call("thread/resume", map[string]any{"threadId": threadID})

	apptest.StartTurn(t, a, threadID, "weather?")
	idA, _ := apptest.ToolCall(t, a) // the oldest subscriber gets it
	require.NoError(t, a.WS.Close(websocket.StatusNormalClosure, "bye"))

	idB, p := apptest.ToolCall(t, b)
	require.Equal(t, "call_w1", p.CallID)
	require.NotEqual(t, string(idA), string(idB), "a new request on the other connection")
	b.Reply(idB, apptest.ToolAnswer("from B", true))
	require.Equal(t, "completed", apptest.TurnCompleted(t, b).Turn.Status)
	require.Equal(t, "from B", apptest.ModelOutput(t, fake, 1, "call_w1"))
	require.Equal(t, 1.0, dlOutcome(t, d, "success"))
}

// TestDynamicLifecycleReconnectAndResume: the only subscriber disconnects
// while holding a call; a new connection resumes the thread and gets the
// call again.
func TestDynamicLifecycleReconnectAndResume(t *testing.T) {
	fake, d := apptest.StartFakeDaemon(t, apptest.DynamicScript("call_w1", `{"city":"Paris"}`, "done"))
	a := d.RPC(t)
	threadID := apptest.StartThread(t, a, map[string]any{"dynamicTools": []any{apptest.WeatherTool}})
	apptest.StartTurn(t, a, threadID, "weather?")
	apptest.ToolCall(t, a)
	require.NoError(t, a.WS.Close(websocket.StatusNormalClosure, "bye"))

	c := d.RPC(t)
	c.Call("thread/resume", map[string]any{"threadId": threadID})
	id, p := apptest.ToolCall(t, c)
	require.Equal(t, "call_w1", p.CallID)
	require.JSONEq(t, `{"city":"Paris"}`, string(p.Arguments))
	c.Reply(id, apptest.ToolAnswer("from C", true))
	require.Equal(t, "completed", apptest.TurnCompleted(t, c).Turn.Status)
	require.Equal(t, "from C", apptest.ModelOutput(t, fake, 1, "call_w1"))
	require.Equal(t, 1.0, dlOutcome(t, d, "success"))
	require.Equal(t, 0.0, dlOutcome(t, d, "timeout"))
}

// TestDynamicLifecycleReconnectTimeout: nobody reconnects within
// dynamic_tool_reconnect_timeout; the model reads the failure and the turn
// completes.
func TestDynamicLifecycleReconnectTimeout(t *testing.T) {
	fake, d := apptest.StartFakeDaemon(t, apptest.DynamicScript("call_w1", `{"city":"Paris"}`, "The client is gone."),
		"-c", `dynamic_tool_reconnect_timeout="300ms"`)
	watcher := d.RPC(t) // initialized, never subscribed: sees status broadcasts only
	a := d.RPC(t)
	threadID := apptest.StartThread(t, a, map[string]any{"dynamicTools": []any{apptest.WeatherTool}})
	apptest.StartTurn(t, a, threadID, "weather?")
	apptest.ToolCall(t, a)
	require.NoError(t, a.WS.Close(websocket.StatusNormalClosure, "bye"))

	// The turn ends without any client: thread/status/changed idle is
	// broadcast to every initialized connection.
	for {
		var st struct {
			ThreadID string `json:"threadId"`
			Status   struct {
				Type string `json:"type"`
			} `json:"status"`
		}
		require.NoError(t, json.Unmarshal(watcher.Until("thread/status/changed").Params, &st))
		if st.ThreadID == threadID && st.Status.Type == "idle" {
			break
		}
	}
	const msg = "dynamic tool call failed: no client that can run lookup_weather was connected within 300ms"
	require.Equal(t, msg, apptest.ModelOutput(t, fake, 1, "call_w1"))
	require.Equal(t, 1.0, dlOutcome(t, d, "timeout"))
	require.Equal(t, 0.0, dlPending(t, d))

	var res struct {
		Thread struct {
			Turns []struct {
				Status string `json:"status"`
			} `json:"turns"`
		} `json:"thread"`
	}
	require.NoError(t, json.Unmarshal(watcher.Call("thread/read", map[string]any{"threadId": threadID, "includeTurns": true}), &res))
	require.Len(t, res.Thread.Turns, 1)
	require.Equal(t, "completed", res.Thread.Turns[0].Status)
	items := string(watcher.Call("thread/items/list", map[string]any{"threadId": threadID}))
	require.Contains(t, items, `"type":"dynamicToolCall"`)
	require.Contains(t, items, msg)
	require.Contains(t, items, "The client is gone.")
}

// TestDynamicLifecycleSeveralClients: two subscribed connections. Turn 1:
// the call goes to one of them, its answer is used, and an answer from the
// other is ignored. Turn 2: the holder unsubscribes, the call moves to the
// other subscriber, whose answer is used; the first holder is told the
// request is resolved and its late answer is ignored.
func TestDynamicLifecycleSeveralClients(t *testing.T) {
	fake, d := apptest.StartFakeDaemon(t, `{"steps":[
		{"match":{"user_text":"one"},"tool_calls":[{"call_id":"call_1","name":"lookup_weather","arguments":{"city":"Paris"}}]},
		{"match":{"call_output":"call_1"},"text":"first done"},
		{"match":{"user_text":"two"},"tool_calls":[{"call_id":"call_2","name":"lookup_weather","arguments":{"city":"Rome"}}]},
		{"match":{"call_output":"call_2"},"text":"second done"}]}`)
	a := d.RPC(t)
	threadID := apptest.StartThread(t, a, map[string]any{"dynamicTools": []any{apptest.WeatherTool}})
	b := d.RPC(t)
	b.Call("thread/resume", map[string]any{"threadId": threadID})
	b.Methods()

	// Turn 1: the oldest subscriber (a) is offered the call.
	apptest.StartTurn(t, a, threadID, "one")
	idA, _ := apptest.ToolCall(t, a)
	b.Send(map[string]any{"id": json.RawMessage(idA), "result": apptest.ToolAnswer("from B", true)})
	a.Reply(idA, apptest.ToolAnswer("from A", true))
	require.Equal(t, "completed", apptest.TurnCompleted(t, a).Turn.Status)
	require.Equal(t, "completed", apptest.TurnCompleted(t, b).Turn.Status)
	require.NotContains(t, b.Methods(), "item/tool/call", "only one connection is offered the call")
	require.Equal(t, "from A", apptest.ModelOutput(t, fake, 1, "call_1"))
	apptest.Sync(b)
	require.Equal(t, 1.0, dlIgnored(t, d, "unknown_call"), "b answered a request it was never sent")

	// Turn 2: a unsubscribes while holding the call.
	apptest.StartTurn(t, a, threadID, "two")
	idA2, _ := apptest.ToolCall(t, a)
	require.JSONEq(t, `{"status":"unsubscribed"}`, string(a.Call("thread/unsubscribe", map[string]any{"threadId": threadID})))
	idB, p := apptest.ToolCall(t, b)
	require.Equal(t, "call_2", p.CallID)
	b.Reply(idB, apptest.ToolAnswer("from B", true))
	require.Equal(t, "completed", apptest.TurnCompleted(t, b).Turn.Status)
	require.Equal(t, "from B", apptest.ModelOutput(t, fake, 3, "call_2"))

	var resolved struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	require.NoError(t, json.Unmarshal(a.Until("serverRequest/resolved").Params, &resolved))
	require.JSONEq(t, string(idA2), string(resolved.RequestID))
	for _, f := range b.Seen {
		require.NotEqual(t, "serverRequest/resolved", f.Method, "the connection whose answer was used is not told")
	}
	a.Reply(idA2, apptest.ToolAnswer("late from A", true))
	apptest.Sync(a)
	require.Equal(t, 1.0, dlIgnored(t, d, "duplicate"))
	require.Equal(t, 2.0, apptest.Metrics(t, d.URL("/metrics"))[`appserver_dynamic_tool_calls_total{outcome="success"}`])
	require.Equal(t, 0.0, dlPending(t, d))
}

// dtReference is what codex-cli 0.169.0 sent and received for the second
// turn of a codex-cli 0.169.0 capture ("Use TOOL please": the
// model calls the client-registered lookup_weather, the client answers, the
// model says "Tool done."), from the turn/start response through
// turn/completed, with the capture's timing field dropped. The thread had
// one plain turn before ("Say hello"), hence the token totals.
const dtReference = `
{"dir":"recv","frame":{"id":7,"result":{"turn":{"id":"01a2003a-f82a-7263-b4a7-121760a32e48","rootTurnId":"01a2003a-f82a-7263-b4a7-121760a32e48","items":[],"itemsView":"notLoaded","status":"inProgress","error":null,"startedAt":null,"completedAt":null,"durationMs":null}}}}
{"dir":"recv","frame":{"method":"thread/status/changed","params":{"threadId":"01a2003a-f69a-78b1-a4ea-dd6e3ea1e306","status":{"type":"active","activeFlags":[]}},"emittedAtMs":1795300194352}}
{"dir":"recv","frame":{"method":"turn/started","params":{"threadId":"01a2003a-f69a-78b1-a4ea-dd6e3ea1e306","turn":{"id":"01a2003a-f82a-7263-b4a7-121760a32e48","rootTurnId":"01a2003a-f82a-7263-b4a7-121760a32e48","items":[],"itemsView":"notLoaded","status":"inProgress","error":null,"startedAt":1795300194,"completedAt":null,"durationMs":null}},"emittedAtMs":1795300194352}}
{"dir":"recv","frame":{"method":"item/started","params":{"item":{"type":"userMessage","id":"01a2003a-f834-72b2-bbc4-5f921ed31be0","clientId":null,"content":[{"type":"text","text":"Use TOOL please","text_elements":[]}],"startedAtMs":1795300194357,"completedAtMs":null},"threadId":"01a2003a-f69a-78b1-a4ea-dd6e3ea1e306","turnId":"01a2003a-f82a-7263-b4a7-121760a32e48","startedAtMs":1795300194357},"emittedAtMs":1795300194358}}
{"dir":"recv","frame":{"method":"item/completed","params":{"item":{"type":"userMessage","id":"01a2003a-f834-72b2-bbc4-5f921ed31be0","clientId":null,"content":[{"type":"text","text":"Use TOOL please","text_elements":[]}],"startedAtMs":1795300194357,"completedAtMs":1795300194357},"threadId":"01a2003a-f69a-78b1-a4ea-dd6e3ea1e306","turnId":"01a2003a-f82a-7263-b4a7-121760a32e48","contentTokenCount":null,"completedAtMs":1795300194357},"emittedAtMs":1795300194359}}
{"dir":"recv","frame":{"method":"item/started","params":{"item":{"type":"dynamicToolCall","id":"call_tool_2","namespace":null,"tool":"lookup_weather","arguments":{"city":"Paris"},"status":"inProgress","contentItems":null,"success":null,"durationMs":null,"startedAtMs":1795300194380,"completedAtMs":null},"threadId":"01a2003a-f69a-78b1-a4ea-dd6e3ea1e306","turnId":"01a2003a-f82a-7263-b4a7-121760a32e48","startedAtMs":1795300194380},"emittedAtMs":1795300194380}}
{"dir":"recv","frame":{"method":"item/tool/call","id":0,"params":{"threadId":"01a2003a-f69a-78b1-a4ea-dd6e3ea1e306","turnId":"01a2003a-f82a-7263-b4a7-121760a32e48","callId":"call_tool_2","namespace":null,"tool":"lookup_weather","arguments":{"city":"Paris"}}}}
{"dir":"send","frame":{"id":0,"result":{"contentItems":[{"type":"inputText","text":"Sunny, 21C"}],"success":true}}}
{"dir":"recv","frame":{"method":"item/completed","params":{"item":{"type":"dynamicToolCall","id":"call_tool_2","namespace":null,"tool":"lookup_weather","arguments":{"city":"Paris"},"status":"completed","contentItems":[{"type":"inputText","text":"Sunny, 21C"}],"success":true,"durationMs":16,"startedAtMs":1795300194380,"completedAtMs":1795300194396},"threadId":"01a2003a-f69a-78b1-a4ea-dd6e3ea1e306","turnId":"01a2003a-f82a-7263-b4a7-121760a32e48","contentTokenCount":null,"completedAtMs":1795300194396},"emittedAtMs":1795300194398}}
{"dir":"recv","frame":{"method":"thread/tokenUsage/updated","params":{"threadId":"01a2003a-f69a-78b1-a4ea-dd6e3ea1e306","turnId":"01a2003a-f82a-7263-b4a7-121760a32e48","tokenUsage":{"total":{"totalTokens":300,"inputTokens":240,"cachedInputTokens":40,"cacheWriteInputTokens":0,"outputTokens":60,"reasoningOutputTokens":20},"last":{"totalTokens":150,"inputTokens":120,"cachedInputTokens":20,"cacheWriteInputTokens":0,"outputTokens":30,"reasoningOutputTokens":10},"modelContextWindow":258400}},"emittedAtMs":1795300194402}}
{"dir":"recv","frame":{"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"codex","limitName":null,"normalModelSlug":null,"primary":null,"secondary":null,"credits":null,"individualLimit":null,"spendControlReached":null,"planType":null,"rateLimitReachedType":null}},"emittedAtMs":1795300194402}}
{"dir":"recv","frame":{"method":"item/started","params":{"item":{"type":"agentMessage","moderation":null,"id":"msg_3","text":"","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":1795300194416,"completedAtMs":null},"threadId":"01a2003a-f69a-78b1-a4ea-dd6e3ea1e306","turnId":"01a2003a-f82a-7263-b4a7-121760a32e48","startedAtMs":1795300194416},"emittedAtMs":1795300194416}}
{"dir":"recv","frame":{"method":"item/agentMessage/delta","params":{"threadId":"01a2003a-f69a-78b1-a4ea-dd6e3ea1e306","turnId":"01a2003a-f82a-7263-b4a7-121760a32e48","itemId":"msg_3","delta":"Tool done."},"emittedAtMs":1795300194416}}
{"dir":"recv","frame":{"method":"item/completed","params":{"item":{"type":"agentMessage","moderation":null,"id":"msg_3","text":"Tool done.","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":1795300194416,"completedAtMs":1795300194416},"threadId":"01a2003a-f69a-78b1-a4ea-dd6e3ea1e306","turnId":"01a2003a-f82a-7263-b4a7-121760a32e48","contentTokenCount":null,"completedAtMs":1795300194416},"emittedAtMs":1795300194417}}
{"dir":"recv","frame":{"method":"thread/tokenUsage/updated","params":{"threadId":"01a2003a-f69a-78b1-a4ea-dd6e3ea1e306","turnId":"01a2003a-f82a-7263-b4a7-121760a32e48","tokenUsage":{"total":{"totalTokens":450,"inputTokens":360,"cachedInputTokens":60,"cacheWriteInputTokens":0,"outputTokens":90,"reasoningOutputTokens":30},"last":{"totalTokens":150,"inputTokens":120,"cachedInputTokens":20,"cacheWriteInputTokens":0,"outputTokens":30,"reasoningOutputTokens":10},"modelContextWindow":258400}},"emittedAtMs":1795300194418}}
{"dir":"recv","frame":{"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"codex","limitName":null,"normalModelSlug":null,"primary":null,"secondary":null,"credits":null,"individualLimit":null,"spendControlReached":null,"planType":null,"rateLimitReachedType":null}},"emittedAtMs":1795300194418}}
{"dir":"recv","frame":{"method":"thread/readState/changed","params":{"threadId":"01a2003a-f69a-78b1-a4ea-dd6e3ea1e306","readState":{"firstUnread":{"type":"turn","turnId":"01a2003a-f7d8-7b63-abb9-0eff8b6433ec"},"revision":"625901e7-b8ab-40cd-9829-917524ecd044"}},"emittedAtMs":1795300194421}}
{"dir":"recv","frame":{"method":"thread/status/changed","params":{"threadId":"01a2003a-f69a-78b1-a4ea-dd6e3ea1e306","status":{"type":"idle"}},"emittedAtMs":1795300194421}}
{"dir":"recv","frame":{"method":"turn/completed","params":{"threadId":"01a2003a-f69a-78b1-a4ea-dd6e3ea1e306","turn":{"id":"01a2003a-f82a-7263-b4a7-121760a32e48","rootTurnId":"01a2003a-f82a-7263-b4a7-121760a32e48","items":[{"type":"agentMessage","moderation":null,"id":"msg_3","text":"Tool done.","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":1795300194416,"completedAtMs":1795300194416}],"itemsView":"summary","status":"completed","error":null,"startedAt":1795300194,"completedAt":1795300194,"durationMs":72}},"emittedAtMs":1795300194421}}
`

// dtNoise are the notifications 0.169.0 sends around a turn that appserver
// does not (docs/protocol.md §8: optional noise clients tolerate).
var dtNoise = map[string]bool{"warning": true, "account/rateLimits/updated": true, "thread/readState/changed": true}

// dtUsage is the reference fake model's usage for every response.
const dtUsage = `"usage":{"input_tokens":120,"cached_input_tokens":20,"output_tokens":30,"reasoning_output_tokens":10,"total_tokens":150}`

// TestDynamicToolTranscriptMatchesReference runs the reference's script on
// appserver and compares every frame from the turn/start response through
// turn/completed with dtReference: the method sequence, every key (and its
// order), null vs value, and every value except ids and clock readings,
// which are normalised (UUIDs by order of appearance, request ids, ms/s
// timestamps and durations).
//
// Known differences, asserted explicitly:
//   - noise: the reference also sends account/rateLimits/updated after each
//     thread/tokenUsage/updated and thread/readState/changed before the
//     final thread/status/changed (dropped from the reference, dtNoise);
//   - key order of the item/tool/call request's top level: the reference
//     sends method, id, params; appserver (rpcws's outbound framing, shared
//     by every message) sends id, method, params. JSON member order carries
//     no meaning; every other object's key order matches.
func TestDynamicToolTranscriptMatchesReference(t *testing.T) {
	fake, d := apptest.StartFakeDaemon(t, `{"steps":[
		{"match":{"user_text":"Say hello"},"reasoning":{"id":"rs_1","summary":["Thinking briefly."]},"text":"Hello there!","chunks":2,`+dtUsage+`},
		{"match":{"user_text":"Use TOOL please"},"tool_calls":[{"id":"fc_2","call_id":"call_tool_2","name":"lookup_weather","arguments":{"city":"Paris"}}],`+dtUsage+`},
		{"match":{"call_output":"call_tool_2"},"text":"Tool done.",`+dtUsage+`}]}`)
	r := d.RPC(t)
	threadID := apptest.StartThread(t, r, map[string]any{
		"approvalPolicy": "on-request", "sandbox": "workspace-write", "threadSource": "user",
		"dynamicTools": []any{
			map[string]any{"type": "namespace", "name": "codex_tui", "description": "TUI tools", "tools": []any{
				map[string]any{"type": "function", "name": "list_threads", "description": "List threads",
					"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}}, "deferLoading": true},
			}},
			apptest.WeatherTool,
		},
	})
	require.Equal(t, "completed", apptest.RunTurn(t, r, threadID, "Say hello").Turn.Status)
	r.Methods()

	// The turn under test, recorded raw.
	var live []string
	start, err := json.Marshal(map[string]any{"id": 7, "method": "turn/start", "params": map[string]any{
		"threadId": threadID, "input": []any{map[string]any{"type": "text", "text": "Use TOOL please", "text_elements": []any{}}},
	}})
	require.NoError(t, err)
	require.NoError(t, r.WS.Write(context.Background(), websocket.MessageText, start))
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		_, data, err := r.WS.Read(ctx)
		cancel()
		require.NoError(t, err, "recorded so far:\n%s", strings.Join(live, "\n"))
		live = append(live, `{"dir":"recv","frame":`+string(data)+`}`)
		var f apptest.Frame
		require.NoError(t, json.Unmarshal(data, &f))
		if f.Method == "item/tool/call" {
			answer := `{"id":` + string(f.ID) + `,"result":{"contentItems":[{"type":"inputText","text":"Sunny, 21C"}],"success":true}}`
			require.NoError(t, r.WS.Write(context.Background(), websocket.MessageText, []byte(answer)))
			live = append(live, `{"dir":"send","frame":`+answer+`}`)
		}
		if f.Method == "turn/completed" {
			break
		}
	}
	require.Equal(t, "Sunny, 21C", apptest.ModelOutput(t, fake, 2, "call_tool_2"))

	ref := dtNormalise(t, strings.Split(strings.TrimSpace(dtReference), "\n"), true)
	got := dtNormalise(t, live, false)
	require.Equal(t, dtMethods(ref), dtMethods(got), "method sequence (reference without noise vs appserver)")
	for i := range ref {
		require.Equal(t, ref[i].canon, got[i].canon, "frame %d (%s): keys and values", i, ref[i].label)
		if ref[i].label == "item/tool/call" {
			// Known difference: rpcws frames every outgoing message as
			// id, method, params…; the reference puts a server request's
			// method first.
			require.Equal(t, ": method,id,params", ref[i].keyOrder[len(ref[i].keyOrder)-1])
			require.Equal(t, ": id,method,params", got[i].keyOrder[len(got[i].keyOrder)-1], "known difference changed")
			got[i].keyOrder[len(got[i].keyOrder)-1] = ref[i].keyOrder[len(ref[i].keyOrder)-1]
		}
		require.Equal(t, ref[i].keyOrder, got[i].keyOrder, "frame %d (%s): key order", i, ref[i].label)
	}
}

// dtFrame is one normalised transcript line.
type dtFrame struct {
	label    string // method, "response" or "answer"
	canon    string // normalised JSON, keys sorted
	keyOrder []string
}

func dtMethods(fs []dtFrame) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.label)
	}
	return out
}

var (
	dtUUID     = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	dtTimeKeys = map[string]bool{"startedAtMs": true, "completedAtMs": true, "emittedAtMs": true, "startedAt": true, "completedAt": true, "durationMs": true}
)

// dtNormalise parses capture lines ({"dir","frame"}), drops the
// reference's noise and normalises ids and clock readings.
func dtNormalise(t *testing.T, lines []string, reference bool) []dtFrame {
	t.Helper()
	ids := map[string]string{}
	var out []dtFrame
	for _, line := range lines {
		var rec struct {
			Dir   string          `json:"dir"`
			Frame json.RawMessage `json:"frame"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(string(rec.Frame)))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&m))
		method, _ := m["method"].(string)
		label := method
		switch {
		case rec.Dir == "send":
			label = "answer"
			m["id"] = "<request>"
		case method == "":
			label = "response"
			m["id"] = "<response>"
		case m["id"] != nil:
			m["id"] = "<request>"
		}
		if dtNoise[method] {
			continue
		}
		dtWalk(m, "", ids)
		canon, err := json.Marshal(m)
		require.NoError(t, err)
		out = append(out, dtFrame{label: label, canon: string(canon), keyOrder: dtKeyOrder(t, rec.Frame)})
	}
	return out
}

// dtWalk replaces UUIDs (numbered by first appearance, keys visited in
// sorted order) and clock readings in place.
func dtWalk(v any, key string, ids map[string]string) any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			x[k] = dtWalk(x[k], k, ids)
		}
	case []any:
		for i := range x {
			x[i] = dtWalk(x[i], key, ids)
		}
	case string:
		if dtUUID.MatchString(x) {
			if _, ok := ids[x]; !ok {
				ids[x] = fmt.Sprintf("<uuid %d>", len(ids)+1)
			}
			return ids[x]
		}
	case json.Number:
		if dtTimeKeys[key] {
			return "<clock>"
		}
	}
	return v
}

// dtKeyOrder lists, for every object in a frame, its path and its keys in
// wire order.
func dtKeyOrder(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	var out []string
	var walk func(path string)
	walk = func(path string) {
		tok, err := dec.Token()
		require.NoError(t, err)
		switch tok {
		case json.Delim('{'):
			var keys []string
			for dec.More() {
				k, err := dec.Token()
				require.NoError(t, err)
				keys = append(keys, k.(string))
				walk(path + "." + k.(string))
			}
			_, err := dec.Token()
			require.NoError(t, err)
			out = append(out, path+": "+strings.Join(keys, ","))
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				walk(fmt.Sprintf("%s[%d]", path, i))
			}
			_, err := dec.Token()
			require.NoError(t, err)
		}
	}
	walk("")
	return out
}
