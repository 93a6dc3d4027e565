package agents

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/registry"
)

// toolsV2 is one turn's collaboration handler over tb, for parent "p" of
// the operator.
func toolsV2(t *testing.T, s *Service, tb *table) func(name, args string) (string, error) {
	t.Helper()
	tb.onTurn = func(id string, running bool) { s.ChildTurn(id, "", running) }
	tb.onEnd = func(id string, st State) { s.ChildEnded(id, "", st) }
	b := registry.NewBuilder(registry.Config{})
	require.NoError(t, s.RegisterV2(b, "p", "", tb, nil))
	_, reg := b.Build()
	h, ok := reg.Handler(V2Namespace, SpawnAgentName)
	require.True(t, ok)
	return func(name, args string) (string, error) {
		out, err := h.Handle(context.Background(), registry.Invocation{Call: registry.Call{
			CallID: "c", Namespace: V2Namespace, Name: name, Payload: registry.FunctionPayload{Arguments: args},
		}})
		return out.Text, err
	}
}

// A v2 spawn names its child by a task path under the caller's, refuses a
// bad or taken name, and starts it with only its task unless fork_turns
// asks for the caller's history; list_agents shows the caller and its
// children by path (a prefix filters them); wait_agent returns once a
// child has news, at once when one ended since the last wait, and times
// out otherwise.
func TestCollaborationTools(t *testing.T) {
	s := New(Config{MaxPerThread: 4, MinWait: time.Millisecond, DefaultWait: 50 * time.Millisecond})
	tb := newTable(0)
	call := toolsV2(t, s, tb)

	out, err := call(SpawnAgentName, `{"task_name":"helper","message":"child task","fork_turns":"none"}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"task_name":"/root/helper"}`, out)
	require.Equal(t, Spawn{Input: textInput("child task"), Nickname: "/root/helper", AgentPath: "/root/helper"}, tb.spawns[0])

	_, err = call(SpawnAgentName, `{"task_name":"helper","message":"again","fork_turns":"none"}`)
	require.ErrorContains(t, err, "exists already")
	_, err = call(SpawnAgentName, `{"task_name":"Bad-Name","message":"x"}`)
	require.ErrorContains(t, err, "lowercase letters")
	_, err = call(SpawnAgentName, `{"task_name":"x","message":"x","fork_turns":"some"}`)
	require.ErrorContains(t, err, "all or none")

	_, err = call(SpawnAgentName, `{"task_name":"reviewer","message":"look"}`)
	require.NoError(t, err)
	require.True(t, tb.spawns[1].ForkContext, "fork_turns defaults to all")

	out, err = call(ListAgentsName, `{}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"agents":[{"agent_name":"/root","agent_status":"running"},{"agent_name":"/root/helper","agent_status":"running"},{"agent_name":"/root/reviewer","agent_status":"running"}]}`, out)
	out, err = call(ListAgentsName, `{"path_prefix":"/root/rev"}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"agents":[]}`, out)
	out, err = call(ListAgentsName, `{"path_prefix":"/root/reviewer"}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"agents":[{"agent_name":"/root/reviewer","agent_status":"running"}]}`, out)

	answer := "done"
	helper := tb.order[0]
	go func() {
		time.Sleep(10 * time.Millisecond)
		tb.finish(helper, State{Status: "completed", Answer: &answer})
	}()
	out, err = call(WaitAgentName, `{"timeout_ms":5000}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"message":"Wait completed.","timed_out":false}`, out)

	tb.finish(tb.order[1], State{Status: "failed", Error: "boom"})
	out, err = call(WaitAgentName, `{}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"message":"Wait completed.","timed_out":false}`, out, "an end before the wait is news")
	out, err = call(WaitAgentName, `{}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"message":"Wait timed out.","timed_out":true}`, out)

	out, err = call(ListAgentsName, `{}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"agents":[{"agent_name":"/root","agent_status":"running"},{"agent_name":"/root/helper","agent_status":{"completed":"done"}},{"agent_name":"/root/reviewer","agent_status":{"errored":"boom"}}]}`, out)
}

// A collaboration child's end reaches its parent as the reference's
// FINAL_ANSWER message; a multi_agent_v1 child's as a
// <subagent_notification>.
func TestEndNote(t *testing.T) {
	answer := "The child answer."
	require.Equal(t, "Message Type: FINAL_ANSWER\nTask name: /root\nSender: /root/helper\nPayload:\nThe child answer.",
		EndNote("t1", "/root/helper", State{Status: "completed", Answer: &answer}))
	require.Equal(t, "Message Type: FINAL_ANSWER\nTask name: /root/a\nSender: /root/a/b\nPayload:\n\"interrupted\"",
		EndNote("t1", "/root/a/b", State{Status: "interrupted"}))
	require.Equal(t, "<subagent_notification>\n{\"agent_path\":\"t1\",\"status\":{\"errored\":\"boom\"}}\n</subagent_notification>",
		EndNote("t1", "", State{Status: "failed", Error: "boom"}))
}
