package turns_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// A model may repeat a tool call id it used in an earlier turn of the
// thread: the reference runs the call again (its item carries the call id
// in both turns, testdata/golden/reference/live_config.jsonl). The call
// runs here too, the model gets both outputs under its own call id, and
// the two items keep ids of their own in the store.
func TestRepeatedCallIDAcrossTurnsRuns(t *testing.T) {
	const call = `{"call_id":"call_same","name":"shell_command","arguments":{"command":"echo same"}}`
	script := `{"steps":[{"tool_calls":[` + call + `]},{"text":"ok 1"},{"tool_calls":[` + call + `]},{"text":"ok 2"},` +
		`{"tool_calls":[` + call + `]},{"text":"ok 3"}]}`
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, script)
			args := append(storeArgs, apptest.FakeArgs(fake, "responses")...)
			d := apptest.Start(t, args...)
			r := d.RPC(t)
			threadID := apptest.StartThread(t, r, map[string]any{"cwd": apptest.Workspace(t), "approvalPolicy": "never", "sandbox": "danger-full-access"})

			var ids []string
			for i, text := range []string{"first", "second", "third"} {
				if i == 2 {
					// A daemon that did not make the thread finds the
					// ids taken in the store.
					d.Stop(t)
					d = apptest.Start(t, args...)
					r = d.RPC(t)
					r.Call("thread/resume", map[string]any{"threadId": threadID})
				}
				frames := apptest.Turn(t, r, apptest.Input(threadID, text), nil)
				var done apptest.TurnResult
				for _, f := range frames {
					if f.Method == "turn/completed" {
						done = apptest.Decode[apptest.TurnResult](t, f.Params)
					}
				}
				require.Equal(t, "completed", done.Turn.Status, "turn %d: %+v", i+1, done.Turn.Error)
				completed := 0
				for id, it := range apptest.Items(t, frames, "completed") {
					if it.Type != "commandExecution" {
						continue
					}
					completed++
					require.NotNil(t, it.AggregatedOutput)
					require.Equal(t, "same\n", *it.AggregatedOutput)
					require.True(t, strings.HasPrefix(id, "call_same"), id)
					ids = append(ids, id)
				}
				require.Equal(t, 1, completed, "turn %d has its command item", i+1)
			}
			require.NotEqual(t, ids[0], ids[1], "the items keep ids of their own")
			require.NotContains(t, ids[:2], ids[2])
			require.Equal(t, "call_same", ids[0], "a call id used once names its item")

			// The model saw both calls and both outputs under its own id.
			reqs := fake.Requests()
			require.Len(t, reqs, 6)
			var last struct {
				Input []struct {
					Type   string `json:"type"`
					CallID string `json:"call_id"`
				} `json:"input"`
			}
			require.NoError(t, json.Unmarshal(reqs[3].Body, &last))
			var calls []string
			for _, in := range last.Input {
				if in.CallID != "" {
					calls = append(calls, in.Type+" "+in.CallID)
				}
			}
			require.Equal(t, []string{"function_call call_same", "function_call_output call_same", "function_call call_same", "function_call_output call_same"}, calls)

			// Both items are stored, each in its turn.
			turns := apptest.ReadTurns(t, r, threadID)
			require.Len(t, turns, 3)
			for i, tu := range turns {
				var got []string
				for _, it := range tu.ItemsOf(t) {
					if it.Type == "commandExecution" {
						got = append(got, it.ID)
					}
				}
				require.Equal(t, []string{ids[i]}, got, "turn %d", i+1)
			}
		})
	}
}
