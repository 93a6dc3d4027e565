package main

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// A thread's goal: set, changed, counted in tokens from its setting on,
// kept across a restart, cleared; subscribers hear of each change.
func TestThreadGoal(t *testing.T) {
	usage := func(total int) string {
		return `"usage":{"input_tokens":` + strconv.Itoa(total-10) + `,"output_tokens":10,"total_tokens":` + strconv.Itoa(total) + `}`
	}
	script := `{"steps":[{"match":{"user_text":"before"},"text":"a",` + usage(100) + `},{"match":{"user_text":"after"},"text":"b",` + usage(250) + `}]}`
	for name, storeArgs := range storeBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := startFake(t, script)
			args := append(storeArgs, fakeArgs(fake, "responses")...)
			d := startDaemon(t, args...)
			r := newRPC(t, d)
			threadID := startThread(t, r, nil)
			r.call("turn/start", teInput(threadID, "before"))
			r.until("turn/completed")

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
				res := r.call("thread/goal/get", map[string]any{"threadId": threadID})
				schemaValidate(t, "ThreadGoalGetResponse", res)
				var out struct {
					Goal *goal `json:"goal"`
				}
				require.NoError(t, json.Unmarshal(res, &out))
				return out.Goal
			}
			set := func(params map[string]any) goal {
				t.Helper()
				params["threadId"] = threadID
				r.seen = nil
				res := r.call("thread/goal/set", params)
				schemaValidate(t, "ThreadGoalSetResponse", res)
				f := r.until("thread/goal/updated")
				schemaValidate(t, "ThreadGoalUpdatedNotification", f.Params)
				var out, note struct {
					Goal goal `json:"goal"`
				}
				require.NoError(t, json.Unmarshal(res, &out))
				require.NoError(t, json.Unmarshal(f.Params, &note))
				require.Equal(t, out.Goal, note.Goal)
				return out.Goal
			}
			require.Nil(t, get())
			f := r.callRaw("thread/goal/set", map[string]any{"threadId": threadID, "status": "paused"})
			require.NotNil(t, f.Error, "a new goal needs an objective")
			f = r.callRaw("thread/goal/set", map[string]any{"threadId": threadID, "objective": "x", "tokenBudget": -1})
			require.NotNil(t, f.Error)

			g := set(map[string]any{"objective": "Ship the release", "tokenBudget": 5000})
			require.Equal(t, "active", g.Status)
			require.Equal(t, int64(0), g.TokensUsed, "tokens before the goal do not count")
			g = set(map[string]any{"status": "paused", "objective": nil})
			require.Equal(t, "Ship the release", g.Objective)
			require.Equal(t, "paused", g.Status)
			require.Equal(t, int64(5000), *g.TokenBudget)

			r.call("turn/start", teInput(threadID, "after"))
			r.until("turn/completed")
			require.Equal(t, int64(250), get().TokensUsed)

			d.stop(t)
			r = newRPC(t, startDaemon(t, args...))
			kept := get()
			require.NotNil(t, kept)
			require.Equal(t, "paused", kept.Status)
			require.Equal(t, int64(250), kept.TokensUsed)

			r.call("thread/resume", map[string]any{"threadId": threadID})
			r.seen = nil
			res := r.call("thread/goal/clear", map[string]any{"threadId": threadID})
			schemaValidate(t, "ThreadGoalClearResponse", res)
			require.JSONEq(t, `{"cleared":true}`, string(res))
			schemaValidate(t, "ThreadGoalClearedNotification", r.until("thread/goal/cleared").Params)
			require.Nil(t, get())
			require.JSONEq(t, `{"cleared":false}`, string(r.call("thread/goal/clear", map[string]any{"threadId": threadID})))
		})
	}
}
