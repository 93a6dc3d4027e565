package goals_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// A thread's goal: set, changed, counted in tokens from its setting on,
// kept across a restart, cleared; subscribers hear of each change.
func TestThreadGoal(t *testing.T) {
	usage := func(total int) string {
		return `"usage":{"input_tokens":` + strconv.Itoa(total-10) + `,"output_tokens":10,"total_tokens":` + strconv.Itoa(total) + `}`
	}
	script := `{"steps":[{"match":{"user_text":"before"},"text":"a",` + usage(100) + `},{"match":{"user_text":"after"},"text":"b",` + usage(250) + `}]}`
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, script)
			args := append(storeArgs, apptest.FakeArgs(fake, "responses")...)
			d := apptest.Start(t, args...)
			r := d.RPC(t)
			threadID := apptest.StartThread(t, r, nil)
			r.Call("turn/start", apptest.Input(threadID, "before"))
			r.Until("turn/completed")

			type goal struct {
				ThreadID    string `json:"threadId"`
				Objective   string `json:"objective"`
				Status      string `json:"status"`
				TokenBudget *int64 `json:"tokenBudget"`
				TokensUsed  int64  `json:"tokensUsed"`
				CreatedAt   int64  `json:"createdAt"`
			}
			get := func() *goal {
				t.Helper()
				res := r.Call("thread/goal/get", map[string]any{"threadId": threadID})
				apptest.ValidateSchema(t, "ThreadGoalGetResponse", res)
				var out struct {
					Goal *goal `json:"goal"`
				}
				require.NoError(t, json.Unmarshal(res, &out))
				return out.Goal
			}
			set := func(params map[string]any) goal {
				t.Helper()
				params["threadId"] = threadID
				r.Seen = nil
				res := r.Call("thread/goal/set", params)
				apptest.ValidateSchema(t, "ThreadGoalSetResponse", res)
				f := r.Until("thread/goal/updated")
				apptest.ValidateSchema(t, "ThreadGoalUpdatedNotification", f.Params)
				var out, note struct {
					Goal goal `json:"goal"`
				}
				require.NoError(t, json.Unmarshal(res, &out))
				require.NoError(t, json.Unmarshal(f.Params, &note))
				require.Equal(t, out.Goal, note.Goal)
				return out.Goal
			}
			require.Nil(t, get())
			f := r.CallRaw("thread/goal/set", map[string]any{"threadId": threadID, "status": "paused"})
			require.NotNil(t, f.Error, "a new goal needs an objective")
			f = r.CallRaw("thread/goal/set", map[string]any{"threadId": threadID, "objective": "x", "tokenBudget": -1})
			require.NotNil(t, f.Error)

			g := set(map[string]any{"objective": "Ship the release", "tokenBudget": 5000})
			require.Equal(t, "active", g.Status)
			require.Equal(t, int64(0), g.TokensUsed, "tokens before the goal do not count")
			g = set(map[string]any{"status": "paused", "objective": nil})
			require.Equal(t, "Ship the release", g.Objective)
			require.Equal(t, "paused", g.Status)
			require.Equal(t, int64(5000), *g.TokenBudget)

			r.Call("turn/start", apptest.Input(threadID, "after"))
			r.Until("turn/completed")
			require.Equal(t, int64(250), get().TokensUsed)

			d.Stop(t)
			r = apptest.Start(t, args...).RPC(t)
			kept := get()
			require.NotNil(t, kept)
			require.Equal(t, "paused", kept.Status)
			require.Equal(t, int64(250), kept.TokensUsed)

			r.Call("thread/resume", map[string]any{"threadId": threadID})
			r.Seen = nil
			res := r.Call("thread/goal/clear", map[string]any{"threadId": threadID})
			apptest.ValidateSchema(t, "ThreadGoalClearResponse", res)
			require.JSONEq(t, `{"cleared":true}`, string(res))
			apptest.ValidateSchema(t, "ThreadGoalClearedNotification", r.Until("thread/goal/cleared").Params)
			require.Nil(t, get())
			require.JSONEq(t, `{"cleared":false}`, string(r.Call("thread/goal/clear", map[string]any{"threadId": threadID})))
		})
	}
}

// The model's goal tools: create_goal sets the thread's goal (subscribers
// hear thread/goal/updated, thread/goal/get shows it), a second create_goal
// is refused, get_goal reads it and update_goal marks it complete with the
// budget report; an ephemeral thread is offered none of them.
func TestGoalTools(t *testing.T) {
	script := `{"steps":[
	{"match":{"user_text":"make a goal"},"tool_calls":[{"call_id":"g1","name":"create_goal","arguments":{"objective":"Fix the flaky test","token_budget":9000}}]},
	{"match":{"call_output":"g1"},"tool_calls":[{"call_id":"g2","name":"create_goal","arguments":{"objective":"Another"}}]},
	{"match":{"call_output":"g2"},"tool_calls":[{"call_id":"g3","name":"get_goal","arguments":{}}]},
	{"match":{"call_output":"g3"},"tool_calls":[{"call_id":"g4","name":"update_goal","arguments":{"status":"paused"}}]},
	{"match":{"call_output":"g4"},"tool_calls":[{"call_id":"g5","name":"update_goal","arguments":{"status":"complete"}}]},
	{"match":{"call_output":"g5"},"text":"done"},
	{"match":{"user_text":"ephemeral"},"text":"ok"}]}`
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, script)
			d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, "responses")...)...)
			r := d.RPC(t)
			threadID := apptest.StartThread(t, r, nil)
			r.Seen = nil
			r.Call("turn/start", apptest.Input(threadID, "make a goal"))
			f := r.Until("thread/goal/updated")
			apptest.ValidateSchema(t, "ThreadGoalUpdatedNotification", f.Params)
			var note struct {
				ThreadID string `json:"threadId"`
				Goal     struct {
					Objective   string `json:"objective"`
					Status      string `json:"status"`
					TokenBudget int64  `json:"tokenBudget"`
				} `json:"goal"`
			}
			require.NoError(t, json.Unmarshal(f.Params, &note))
			require.Equal(t, threadID, note.ThreadID)
			require.Equal(t, "Fix the flaky test", note.Goal.Objective)
			require.Equal(t, "active", note.Goal.Status)
			require.Equal(t, int64(9000), note.Goal.TokenBudget)
			r.Until("turn/completed")

			// The tool's goal is the thread's goal.
			res := r.Call("thread/goal/get", map[string]any{"threadId": threadID})
			apptest.ValidateSchema(t, "ThreadGoalGetResponse", res)
			require.Contains(t, string(res), `"objective":"Fix the flaky test"`)
			require.Contains(t, string(res), `"status":"complete"`)

			reqs := fake.Requests()
			require.Len(t, reqs, 6)
			for _, tool := range []string{`"name":"get_goal"`, `"name":"create_goal"`, `"name":"update_goal"`} {
				require.Contains(t, string(reqs[0].Body), tool)
			}
			var created struct {
				Goal struct {
					Objective string `json:"objective"`
				} `json:"goal"`
				RemainingTokens int64 `json:"remainingTokens"`
			}
			require.NoError(t, json.Unmarshal([]byte(apptest.ModelOutput(t, fake, 1, "g1")), &created))
			require.Equal(t, "Fix the flaky test", created.Goal.Objective)
			require.Equal(t, int64(9000), created.RemainingTokens)
			require.Contains(t, apptest.ModelOutput(t, fake, 2, "g2"), "already has a goal")
			require.Contains(t, apptest.ModelOutput(t, fake, 3, "g3"), `"objective": "Fix the flaky test"`)
			require.Contains(t, apptest.ModelOutput(t, fake, 4, "g4"), "only set status complete or blocked")
			done := apptest.ModelOutput(t, fake, 5, "g5")
			require.Contains(t, done, `"status": "complete"`)
			require.Contains(t, done, "Report final budget usage to the user")

			// An ephemeral thread cannot keep a goal: no goal tools.
			res = r.Call("thread/start", map[string]any{"ephemeral": true})
			var eph struct {
				Thread struct {
					ID string `json:"id"`
				} `json:"thread"`
			}
			require.NoError(t, json.Unmarshal(res, &eph))
			r.Call("turn/start", apptest.Input(eph.Thread.ID, "ephemeral"))
			r.Until("turn/completed")
			reqs = fake.Requests()
			require.NotContains(t, string(reqs[len(reqs)-1].Body), `"name":"create_goal"`)
		})
	}
}
