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
