package turns_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
)

// With on_exceeded = "ask", a turn that finds its thread's budget spent
// asks the websocket client through the hub, as any approval: accept
// runs the turn, decline ends it failed with the budget's message.
func TestBudgetApprovalToContinueOverWebsocket(t *testing.T) {
	step := `{"text":"ok","usage":{"input_tokens":500,"output_tokens":100,"total_tokens":600}}`
	fake := apptest.StartFake(t, `{"steps":[`+strings.Repeat(step+",", 5)+step+`]}`)
	d := apptest.Start(t, append(apptest.FakeArgs(fake, "responses"),
		"-c", "budgets.thread.max_tokens=1000", "-c", `budgets.on_exceeded="ask"`)...)
	r := d.RPC(t)
	thread := apptest.StartThread(t, r, nil)
	require.Equal(t, "completed", apptest.RunTurn(t, r, thread, "one").Turn.Status)
	require.Equal(t, "completed", apptest.RunTurn(t, r, thread, "two").Turn.Status)

	ask := func(action, used string) apptest.TurnResult {
		t.Helper()
		r.Call("turn/start", apptest.Input(thread, "more"))
		f := r.Until("mcpServer/elicitation/request")
		p := apptest.Decode[api.McpServerElicitationRequestParams](t, f.Params)
		require.Equal(t, thread, p.ThreadID)
		require.Equal(t, "budget exceeded: thread token limit 1000 reached ("+used+" used). Continue this turn?", p.Message)
		require.JSONEq(t, `{"appserver_approval_kind":"budget","scope":"thread"}`, string(p.Meta))
		r.Reply(f.ID, map[string]any{"action": action})
		return apptest.Decode[apptest.TurnResult](t, r.Until("turn/completed").Params)
	}
	require.Equal(t, "completed", ask("accept", "1200").Turn.Status)
	require.Len(t, fake.Requests(), 3)
	declined := ask("decline", "1800")
	require.Equal(t, "failed", declined.Turn.Status)
	require.Equal(t, "budget exceeded: thread token limit 1000 reached (1800 used); going on was declined", declined.Turn.Error.Message)
	require.JSONEq(t, `"sessionBudgetExceeded"`, string(declined.Turn.Error.CodexErrorInfo))
	require.Len(t, fake.Requests(), 3)

	// thread/tokenUsage/updated carries what is left.
	var usage api.ThreadTokenUsageUpdatedNotification
	for _, f := range r.Seen {
		if f.Method == "thread/tokenUsage/updated" {
			require.NoError(t, json.Unmarshal(f.Params, &usage))
		}
	}
	require.NotNil(t, usage.Budget)
	require.Equal(t, int64(1800), usage.Budget.Thread.UsedTokens)
	require.Equal(t, int64(0), *usage.Budget.Thread.RemainingTokens)
}
