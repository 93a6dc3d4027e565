package turns_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

// A child whose turn was running when the daemon died reads as
// interrupted after Recover, not as the end of its turn before.
func TestChildRunningAtACrashReadsInterrupted(t *testing.T) {
	m, st, _ := setup(t, `{"steps":[]}`, 0)
	ctx := context.Background()
	res, after, err := m.StartThread(ctx, turns.Caller{Conn: 1}, api.ThreadStartParams{})
	require.NoError(t, err)
	after()
	parent := res.Thread.ID

	now := time.Now()
	child := "0194f0d2-7c1e-7c3a-9b1e-1f2e3d4c5b6a"
	meta := `{"approvalPolicy":"never","sandbox":{"type":"readOnly"},"cliVersion":"","subAgent":{"parentThreadId":"` + parent +
		`","depth":1,"lastStatus":"completed","lastAnswer":"old answer","endedTurnId":"t1"}}`
	th := &store.Thread{ID: child, Cwd: "/", ModelProvider: "fake", Source: "subAgent", CreatedAt: now, UpdatedAt: now, RecencyAt: now, Meta: []byte(meta)}
	done := now.Add(time.Second)
	t1 := &store.Turn{ThreadID: child, ID: "t1", Status: store.TurnCompleted, StartedAt: &now, CompletedAt: &done}
	t2 := &store.Turn{ThreadID: child, ID: "t2", Status: store.TurnInProgress, StartedAt: &done}
	require.NoError(t, st.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{th}, CreateTurns: []*store.Turn{t1, t2}}))
	require.NoError(t, m.Recover(ctx))

	kids := turns.ChildrenOf(m, parent)
	state, err := kids.State(ctx, child)
	require.NoError(t, err)
	require.Equal(t, turns.AgentState{Status: api.TurnInterrupted}, state)

	read, err := m.ReadThread(ctx, api.ThreadReadParams{ThreadID: child})
	require.NoError(t, err)
	require.Equal(t, parent, *read.Thread.ParentThreadID)

	_, err = turns.ChildrenOf(m, child).State(ctx, parent)
	require.ErrorContains(t, err, "not found", "a thread reaches only its own children")
}
