package turns_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// turn/settings/update changes the model and effort of the running turn's
// next requests, not of the thread's later turns.
func TestTurnSettingsUpdate(t *testing.T) {
	ws := apptest.Workspace(t)
	script := `{"steps":[
		{"tool_calls":[` + apptest.ShellCall("call_a", "touch a.txt") + `]},
		{"match":{"call_output":"call_a"},"text":"done"},
		{"match":{"user_text":"again"},"text":"again done"}]}`
	fake, _, r := apptest.StartWithFake(t, script)
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws, "approvalPolicy": "untrusted"})
	update := func(turnID string, params map[string]any) string {
		t.Helper()
		params["threadId"], params["turnId"] = threadID, turnID
		res := r.Call("turn/settings/update", params)
		apptest.ValidateSchema(t, "TurnSettingsUpdateResponse", res)
		var out struct {
			Status string `json:"status"`
		}
		require.NoError(t, json.Unmarshal(res, &out))
		return out.Status
	}

	r.Seen = nil
	var started struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	require.NoError(t, json.Unmarshal(r.Call("turn/start", apptest.Input(threadID, "go")), &started))
	turnID := started.Turn.ID
	ask := r.Until("item/commandExecution/requestApproval")
	require.Equal(t, "targetUnavailable", update("not-this-turn", map[string]any{"model": "other-model"}))
	require.Equal(t, "applied", update(turnID, map[string]any{"model": "other-model", "effort": "low"}))
	require.Equal(t, "applied", update(turnID, map[string]any{"effort": "high", "summary": nil}))
	r.Reply(ask.ID, map[string]any{"decision": "accept"})
	r.Until("turn/completed")
	require.FileExists(t, filepath.Join(ws, "a.txt"))
	require.Equal(t, "targetUnavailable", update(turnID, map[string]any{"model": "other-model"}))

	r.Call("turn/start", apptest.Input(threadID, "again"))
	r.Until("turn/completed")

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
