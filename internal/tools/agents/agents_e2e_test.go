package agents_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/model/fakemodel"
)

// With features.multi_agent on in the daemon's config, a turn spawns a
// child and waits for it over the real websocket, on both stores: the
// parent's client sees the collabAgentToolCall items and the child's turn
// end, the wait returns the child's answer, and thread/read shows the child
// with its parent.
func TestSubAgentSpawnAndWait(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[
				{"match":{"user_text":"<subagent_notification>"},"text":"parent done"},
				{"match":{"user_text":"parent task"},"tool_calls":[{"call_id":"c1","name":"multi_agent_v1.spawn_agent","arguments":{"message":"child task"}}]},
				{"match":{"user_text":"child task"},"delay_ms":300,"text":"the child's answer"},
				{"match":{"call_output":"c1"},"tool_calls":[{"call_id":"c2","name":"multi_agent_v1.wait_agent","arguments":{"targets":["Ada"],"timeout_ms":20000}}]}
			]}`)
			args := append(append([]string{}, storeArgs...), apptest.FakeArgs(fake, "responses")...)
			d := apptest.Start(t, append(args, "-c", "features.multi_agent=true")...)
			r := d.RPC(t)
			parent := apptest.StartThread(t, r, nil)
			r.Call("turn/start", map[string]any{"threadId": parent, "input": []any{map[string]any{"type": "text", "text": "parent task"}}})

			var ends []string // thread ids of the turn/completed seen, in order
			for {
				var done struct {
					ThreadID string `json:"threadId"`
					Turn     struct {
						Status string `json:"status"`
					} `json:"turn"`
				}
				require.NoError(t, json.Unmarshal(r.Until("turn/completed").Params, &done))
				ends = append(ends, done.ThreadID)
				if done.ThreadID == parent {
					require.Equal(t, "completed", done.Turn.Status)
					break
				}
			}
			require.Len(t, ends, 2, "the child's turn end reached the parent's client first")
			child := ends[0]

			var tools []string
			for _, f := range r.Seen {
				if f.Method != "item/completed" {
					continue
				}
				var n struct {
					Item struct {
						Type         string                     `json:"type"`
						Tool         string                     `json:"tool"`
						AgentsStates map[string]json.RawMessage `json:"agentsStates"`
					} `json:"item"`
				}
				require.NoError(t, json.Unmarshal(f.Params, &n))
				if n.Item.Type == "collabAgentToolCall" {
					tools = append(tools, n.Item.Tool)
					if n.Item.Tool == "wait" {
						require.JSONEq(t, `{"status":"completed","message":"the child's answer"}`, string(n.Item.AgentsStates[child]))
					}
				}
			}
			require.Equal(t, []string{"spawnAgent", "wait"}, tools)

			var read struct {
				Thread struct {
					ParentThreadID *string         `json:"parentThreadId"`
					ThreadSource   *string         `json:"threadSource"`
					Source         json.RawMessage `json:"source"`
				} `json:"thread"`
			}
			require.NoError(t, json.Unmarshal(r.Call("thread/read", map[string]any{"threadId": child}), &read))
			require.Equal(t, parent, *read.Thread.ParentThreadID)
			require.Equal(t, "subagent", *read.Thread.ThreadSource)
			require.Contains(t, string(read.Thread.Source), `"parent_thread_id":"`+parent+`"`)
		})
	}
}

// agentsCrashScript drives TestSubAgentSurvivesKillNine: the parent's first
// turn spawns a child whose model stalls; the daemon dies under the child;
// on the restarted daemon the parent's next turn waits for the child (it
// reads interrupted), gives it more input, waits for its answer and closes
// it once told of its end (the note follows wait-2's output: the child
// answers after the parent's wait began).
const agentsCrashScript = `{"steps":[
	{"name":"spawn","match":{"user_text":"parent task"},"tool_calls":[{"call_id":"c1","name":"multi_agent_v1.spawn_agent","arguments":{"message":"slow child"}}]},
	{"name":"child-stalls","match":{"user_text":"slow child"},"text":"never finishes","fail":{"kind":"stall","after_events":2}},
	{"name":"spawned","match":{"call_output":"c1"},"text":"the child works"},
	{"name":"wait-1","match":{"user_text":"after the crash"},"tool_calls":[{"call_id":"c2","name":"multi_agent_v1.wait_agent","arguments":{"targets":["Ada"],"timeout_ms":20000}}]},
	{"name":"send","match":{"call_output":"c2"},"tool_calls":[{"call_id":"c3","name":"multi_agent_v1.send_input","arguments":{"target":"Ada","message":"continue please"}}]},
	{"name":"child-again","match":{"user_text":"continue please"},"delay_ms":300,"text":"child resumed"},
	{"name":"wait-2","match":{"call_output":"c3"},"tool_calls":[{"call_id":"c4","name":"multi_agent_v1.wait_agent","arguments":{"targets":["Ada"],"timeout_ms":20000}}]},
	{"name":"close","times":1,"match":{"user_text":"<subagent_notification>"},"tool_calls":[{"call_id":"c5","name":"multi_agent_v1.close_agent","arguments":{"target":"Ada"}}]},
	{"name":"done","match":{"call_output":"c5"},"text":"all settled"}
]}`

// stepChildStalls is the index of agentsCrashScript's stalling step.
const stepChildStalls = 1

// A daemon killed with SIGKILL while a child's turn runs: after the
// restart the child reads interrupted, the parent's next turn reaches it
// by its nickname without resume_agent (its open children were counted
// again), wait_agent returns "interrupted", send_input starts it again and
// close_agent closes it; on both stores.
func TestSubAgentSurvivesKillNine(t *testing.T) {
	apptest.BuildBinary()
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, agentsCrashScript)
			// A fixed node id: on Postgres the restarted daemon settles the
			// turns its previous process left at once, rather than when
			// their leases expire.
			args := append(append(append([]string{}, storeArgs...), "--data-dir", t.TempDir(), "-c", "features.multi_agent=true", "-c", `node_id="agents-crash"`), apptest.FakeArgs(fake, "responses")...)

			d1 := apptest.StartProc(t, args...)
			r := d1.RPC(t)
			parent := apptest.StartThread(t, r, nil)
			r.Call("turn/start", map[string]any{"threadId": parent, "input": []any{map[string]any{"type": "text", "text": "parent task"}}})
			require.Equal(t, "completed", agentsTurnEnd(t, r, parent).Turn.Status)
			var spawned struct {
				AgentID string `json:"agent_id"`
			}
			require.NoError(t, json.Unmarshal([]byte(agentsCallOutput(t, fake, "c1")), &spawned))
			child := spawned.AgentID
			// The child's model request is in flight (stalled) when the
			// daemon dies.
			require.Eventually(t, func() bool {
				return slices.ContainsFunc(fake.Requests(), func(rq fakemodel.RecordedRequest) bool { return rq.Step == stepChildStalls })
			}, 20*time.Second, 10*time.Millisecond)
			d1.Kill9(t)

			d2 := apptest.StartProc(t, args...)
			r2 := d2.RPC(t)
			var read struct {
				Thread struct {
					ParentThreadID *string `json:"parentThreadId"`
					Turns          []struct {
						Status     string `json:"status"`
						RootTurnID string `json:"rootTurnId"`
					} `json:"turns"`
				} `json:"thread"`
			}
			require.NoError(t, json.Unmarshal(r2.Call("thread/read", map[string]any{"threadId": child, "includeTurns": true}), &read))
			require.Equal(t, parent, *read.Thread.ParentThreadID)
			require.Len(t, read.Thread.Turns, 1)
			require.Equal(t, "interrupted", read.Thread.Turns[0].Status, "the child's turn died with the daemon")

			r2.Call("thread/resume", map[string]any{"threadId": parent})
			r2.Call("turn/start", map[string]any{"threadId": parent, "input": []any{map[string]any{"type": "text", "text": "after the crash"}}})
			require.Equal(t, "completed", agentsTurnEnd(t, r2, parent).Turn.Status)

			require.JSONEq(t, `{"status":{"`+child+`":"interrupted"},"timed_out":false}`, agentsCallOutput(t, fake, "c2"))
			require.JSONEq(t, `{"submission_id":"`+child+`"}`, agentsCallOutput(t, fake, "c3"))
			require.JSONEq(t, `{"status":{"`+child+`":{"completed":"child resumed"}},"timed_out":false}`, agentsCallOutput(t, fake, "c4"))
			require.JSONEq(t, `{"previous_status":{"completed":"child resumed"}}`, agentsCallOutput(t, fake, "c5"))
		})
	}
}

// agentsTurnEnd waits for the turn/completed of threadID, passing over
// those of its children.
func agentsTurnEnd(t *testing.T, r *apptest.Client, threadID string) apptest.TurnResult {
	t.Helper()
	for {
		f := r.Until("turn/completed")
		var n struct {
			ThreadID string `json:"threadId"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &n))
		if n.ThreadID == threadID {
			var tr apptest.TurnResult
			require.NoError(t, json.Unmarshal(f.Params, &tr))
			return tr
		}
	}
}

// agentsCallOutput is the output of tool call callID the fake model was
// sent.
func agentsCallOutput(t *testing.T, fake *fakemodel.Server, callID string) string {
	t.Helper()
	for _, rq := range fake.Requests() {
		var body struct {
			Input []struct {
				Type   string `json:"type"`
				CallID string `json:"call_id"`
				Output string `json:"output"`
			} `json:"input"`
		}
		if rq.Decode(&body) != nil {
			continue
		}
		for _, in := range body.Input {
			if in.Type == "function_call_output" && in.CallID == callID {
				return in.Output
			}
		}
	}
	t.Fatalf("the model never got the output of %s", callID)
	return ""
}

// Over the HTTP API: the parent's event stream carries its child's events
// (each naming the child's thread), GET /v1/threads/{id}/children lists the
// child under its parent, and GET /v1/threads leaves it out.
func TestSubAgentOverHTTP(t *testing.T) {
	_, d, _ := apptest.StartWithFake(t, `{"steps":[
		{"match":{"user_text":"parent task"},"tool_calls":[{"call_id":"c1","name":"multi_agent_v1.spawn_agent","arguments":{"message":"child task"}}]},
		{"match":{"user_text":"child task"},"text":"the child's answer"},
		{"match":{"call_output":"c1"},"tool_calls":[{"call_id":"c2","name":"multi_agent_v1.wait_agent","arguments":{"targets":["Ada"],"timeout_ms":20000}}]},
		{"match":{"call_output":"c2"},"text":"parent done"}
	]}`, "-c", "features.multi_agent=true")
	resp := d.Do(t, "POST", "/v1/threads", "", map[string]any{})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var created api.HTTPThread
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&created))
	parent := created.Thread.ID
	sse := d.OpenEvents(t, "/v1/threads/"+parent+"/events", "")
	resp = d.Do(t, "POST", "/v1/threads/"+parent+"/turns", "", map[string]any{"input": []any{map[string]any{"type": "text", "text": "parent task"}}})
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	// The child's turn starts and ends on the parent's stream, then the
	// parent's turn ends.
	byThread := map[string][]string{} // thread id -> its methods on the stream
	for {
		ev := sse.Until("turn/completed")
		var n struct {
			ThreadID string `json:"threadId"`
		}
		require.NoError(t, json.Unmarshal(ev.Params, &n))
		byThread[n.ThreadID] = append(byThread[n.ThreadID], ev.Method)
		if n.ThreadID == parent {
			break
		}
	}
	require.Len(t, byThread, 2, "one child's turn ended on the parent's stream")
	var child string
	for id := range byThread {
		if id != parent {
			child = id
		}
	}

	kids := apptest.GetJSON[api.HTTPThreadList](t, d, "/v1/threads/"+parent+"/children", "")
	require.Len(t, kids.Data, 1)
	require.Equal(t, child, kids.Data[0].ID)
	require.Equal(t, parent, *kids.Data[0].ParentThreadID)
	require.Nil(t, kids.NextCursor)
	none := apptest.GetJSON[api.HTTPThreadList](t, d, "/v1/threads/"+child+"/children", "")
	require.Empty(t, none.Data)
	all := apptest.GetJSON[api.HTTPThreadList](t, d, "/v1/threads", "")
	require.Len(t, all.Data, 1, "the thread list leaves sub-agents out")
	require.Equal(t, parent, all.Data[0].ID)
	require.Equal(t, http.StatusNotFound, d.Do(t, "GET", "/v1/threads/0194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a/children", "", nil).StatusCode)
}
