package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// turn/settings/update changes the model and effort of the running turn's
// next requests, not of the thread's later turns.
func TestTurnSettingsUpdate(t *testing.T) {
	ws := teWorkspace(t)
	script := `{"steps":[
		{"tool_calls":[` + teShellCall("call_a", "touch a.txt") + `]},
		{"match":{"call_output":"call_a"},"text":"done"},
		{"match":{"user_text":"again"},"text":"again done"}]}`
	fake, _, r := teDaemon(t, script)
	threadID := startThread(t, r, map[string]any{"cwd": ws, "approvalPolicy": "untrusted"})
	update := func(turnID string, params map[string]any) string {
		t.Helper()
		params["threadId"], params["turnId"] = threadID, turnID
		res := r.call("turn/settings/update", params)
		schemaValidate(t, "TurnSettingsUpdateResponse", res)
		var out struct {
			Status string `json:"status"`
		}
		require.NoError(t, json.Unmarshal(res, &out))
		return out.Status
	}

	r.seen = nil
	var started struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	require.NoError(t, json.Unmarshal(r.call("turn/start", teInput(threadID, "go")), &started))
	turnID := started.Turn.ID
	ask := r.until("item/commandExecution/requestApproval")
	require.Equal(t, "targetUnavailable", update("not-this-turn", map[string]any{"model": "other-model"}))
	require.Equal(t, "applied", update(turnID, map[string]any{"model": "other-model", "effort": "low"}))
	require.Equal(t, "applied", update(turnID, map[string]any{"effort": "high", "summary": nil}))
	r.reply(ask.ID, map[string]any{"decision": "accept"})
	r.until("turn/completed")
	require.FileExists(t, filepath.Join(ws, "a.txt"))
	require.Equal(t, "targetUnavailable", update(turnID, map[string]any{"model": "other-model"}))

	r.call("turn/start", teInput(threadID, "again"))
	r.until("turn/completed")

	type request struct {
		Model     string `json:"model"`
		Reasoning *struct {
			Effort string `json:"effort"`
		} `json:"reasoning"`
	}
	reqs := fake.Requests()
	require.Len(t, reqs, 3)
	var got []request
	for _, rq := range reqs {
		var b request
		require.NoError(t, rq.Decode(&b))
		got = append(got, b)
	}
	require.NotEqual(t, "other-model", got[0].Model)
	require.Equal(t, "other-model", got[1].Model)
	require.NotNil(t, got[1].Reasoning)
	require.Equal(t, "high", got[1].Reasoning.Effort)
	require.Equal(t, got[0].Model, got[2].Model, "the thread's later turns keep its model")
}
