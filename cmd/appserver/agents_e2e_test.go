package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// With features.multi_agent on in the daemon's config, a turn spawns a
// child and waits for it over the real websocket, on both stores: the
// parent's client sees the collabAgentToolCall items and the child's turn
// end, the wait returns the child's answer, and thread/read shows the child
// with its parent.
func TestSubAgentSpawnAndWait(t *testing.T) {
	for name, storeArgs := range storeBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := startFake(t, `{"steps":[
				{"match":{"user_text":"parent task"},"tool_calls":[{"call_id":"c1","name":"multi_agent_v1.spawn_agent","arguments":{"message":"child task"}}]},
				{"match":{"user_text":"child task"},"text":"the child's answer"},
				{"match":{"call_output":"c1"},"tool_calls":[{"call_id":"c2","name":"multi_agent_v1.wait_agent","arguments":{"targets":["Ada"],"timeout_ms":20000}}]},
				{"match":{"call_output":"c2"},"text":"parent done"}
			]}`)
			args := append(append([]string{}, storeArgs...), fakeArgs(fake, "responses")...)
			d := startDaemon(t, append(args, "-c", "features.multi_agent=true")...)
			r := newRPC(t, d)
			parent := startThread(t, r, nil)
			r.call("turn/start", map[string]any{"threadId": parent, "input": []any{map[string]any{"type": "text", "text": "parent task"}}})

			var ends []string // thread ids of the turn/completed seen, in order
			for {
				var done struct {
					ThreadID string `json:"threadId"`
					Turn     struct {
						Status string `json:"status"`
					} `json:"turn"`
				}
				require.NoError(t, json.Unmarshal(r.until("turn/completed").Params, &done))
				ends = append(ends, done.ThreadID)
				if done.ThreadID == parent {
					require.Equal(t, "completed", done.Turn.Status)
					break
				}
			}
			require.Len(t, ends, 2, "the child's turn end reached the parent's client first")
			child := ends[0]

			var tools []string
			for _, f := range r.seen {
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
			require.NoError(t, json.Unmarshal(r.call("thread/read", map[string]any{"threadId": child}), &read))
			require.Equal(t, parent, *read.Thread.ParentThreadID)
			require.Equal(t, "subagent", *read.Thread.ThreadSource)
			require.Contains(t, string(read.Thread.Source), `"parent_thread_id":"`+parent+`"`)
		})
	}
}
