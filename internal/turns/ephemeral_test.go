package turns_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/turns"
)

func TestEphemeralThreadStaysOutOfTheDurableStore(t *testing.T) {
	ctx := context.Background()
	m, st, rec := setup(t, `{"steps":[]}`, 20*time.Millisecond)
	yes := true
	res, after, err := m.StartThread(ctx, turns.Caller{Conn: 1}, api.ThreadStartParams{Ephemeral: &yes})
	require.NoError(t, err)
	after()
	id := res.Thread.ID
	require.True(t, res.Thread.Ephemeral)
	turn, after, err := m.StartTurn(ctx, turns.Caller{Conn: 1}, api.TurnStartParams{
		ThreadID: id, Input: api.List[api.UserInput]{{Type: api.UserInputText, Text: "hi"}},
	})
	require.NoError(t, err)
	after()
	rec.wait(t, "turn/completed")

	_, err = st.GetThread(ctx, id)
	require.True(t, apperr.Is(err, apperr.NotFound), "the durable store never saw it: %v", err)
	list, err := m.ListThreads(ctx, principal.Operator(), api.ThreadListParams{})
	require.NoError(t, err)
	require.Empty(t, list.Data)

	// Its transcript reads like a stored one's, ordering included.
	read, err := m.ReadThread(ctx, api.ThreadReadParams{ThreadID: id, IncludeTurns: &yes})
	require.NoError(t, err)
	require.True(t, read.Thread.Ephemeral)
	require.Len(t, read.Thread.Turns, 1)
	require.Equal(t, turn.Turn.ID, read.Thread.Turns[0].ID)
	desc := api.SortDesc
	items, err := m.ListItems(ctx, api.ThreadItemsListParams{ThreadID: id, SortDirection: &desc})
	require.NoError(t, err)
	require.Len(t, items.Data, 2)
	require.Equal(t, api.ItemAgentMessage, items.Data[0].Item.Body.ItemType(), "newest first")

	// It cannot be forked, not even into the durable store: as the
	// reference, which keeps no rollout of it.
	_, _, err = m.ForkThread(ctx, turns.Caller{Conn: 1}, api.ThreadForkParams{ThreadID: id})
	require.True(t, apperr.Is(err, apperr.NotFound), "%v", err)
	require.Equal(t, "no rollout found for thread id "+id, apperr.MessageOf(err))
	stored, err := st.ListThreads(ctx, store.ListThreadsQuery{})
	require.NoError(t, err)
	require.Empty(t, stored.Threads, "no copy reached the durable store")

	// Once unloaded it is gone, memory included.
	_, err = m.Unsubscribe(turns.Caller{Conn: 1}, api.ThreadUnsubscribeParams{ThreadID: id})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return m.EphemeralThreads() == 0 }, 10*time.Second, time.Millisecond)
	_, err = m.ReadThread(ctx, api.ThreadReadParams{ThreadID: id})
	require.True(t, apperr.Is(err, apperr.NotFound), "%v", err)
}

// A Manager given no memory store refuses ephemeral threads, in words the
// client reads, rather than writing them to the durable store.
func TestEphemeralThreadsNeedAMemoryStore(t *testing.T) {
	st, _, client := storeAndModel(t, `{"steps":[]}`)
	m, err := turns.New(turns.Config{
		Store: st, Sink: sinkFor(newRecorder()), Models: oneProvider{client},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	yes := true
	_, _, err = m.StartThread(context.Background(), turns.Caller{Conn: 1}, api.ThreadStartParams{Ephemeral: &yes})
	require.True(t, apperr.Is(err, apperr.Invalid), "%v", err)
	page, err := st.ListThreads(context.Background(), store.ListThreadsQuery{})
	require.NoError(t, err)
	require.Empty(t, page.Threads)
}
