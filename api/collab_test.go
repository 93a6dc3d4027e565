package api

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// A collabAgentToolCall item encodes with the reference's field names and
// nulls, and decodes back to its own type.
func TestCollabAgentToolCallItemWire(t *testing.T) {
	answer, prompt := "done", "do it"
	it := ThreadItem{Body: &CollabAgentToolCallItem{
		ID: "call_1", Tool: CollabWait, Status: StatusCompleted, SenderThreadID: "p",
		ReceiverThreadIDs: List[string]{"c"}, Prompt: &prompt,
		AgentsStates: map[string]CollabAgentState{"c": {Status: CollabCompleted, Message: &answer}},
	}}
	b, err := json.Marshal(it)
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"collabAgentToolCall","id":"call_1","tool":"wait","status":"completed","senderThreadId":"p",
		"receiverThreadIds":["c"],"prompt":"do it","model":null,"reasoningEffort":null,
		"agentsStates":{"c":{"status":"completed","message":"done"}},"startedAtMs":null,"completedAtMs":null}`, string(b))
	var back ThreadItem
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, it, back)
}

// subAgentActivity items as codex 0.171.0 sent them (a spawn's and a
// child's end) decode to their own type and encode back byte for byte in
// meaning.
func TestSubAgentActivityItemWire(t *testing.T) {
	for _, raw := range []string{
		`{"type":"subAgentActivity","model":"gpt-5.5","reasoningEffort":"medium","id":"call_spawn","kind":"started","agentThreadId":"t1","agentPath":"/root/helper","startedAtMs":1,"completedAtMs":2}`,
		`{"type":"subAgentActivity","model":null,"reasoningEffort":null,"id":"subagent-completed-u1","kind":"completed","agentThreadId":"t1","agentPath":"/root/helper","startedAtMs":3,"completedAtMs":null}`,
	} {
		var it ThreadItem
		require.NoError(t, json.Unmarshal([]byte(raw), &it))
		body, ok := it.Body.(*SubAgentActivityItem)
		require.True(t, ok, "%T", it.Body)
		require.Equal(t, "/root/helper", body.AgentPath)
		b, err := json.Marshal(it)
		require.NoError(t, err)
		require.JSONEq(t, raw, string(b))
	}
}
