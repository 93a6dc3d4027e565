package storetest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

func queued(threadID, clientID, text string) *store.QueuedSubmission {
	return &store.QueuedSubmission{ThreadID: threadID, ID: newID(), ClientID: clientID,
		Payload: json.RawMessage(`{"input":[{"type":"text","text":"` + text + `"}]}`)}
}

func queueIDs(t *testing.T, s store.Store, threadID string) []string {
	t.Helper()
	list, err := s.ListQueued(context.Background(), threadID)
	require.NoError(t, err)
	ids := []string{}
	for _, q := range list {
		ids = append(ids, q.ID)
	}
	return ids
}

func testQueue(t *testing.T, s store.Store) {
	ctx := context.Background()
	th, _ := createThread(t, s)
	other, _ := createThread(t, s)

	a, b, c := queued(th.ID, "ca", "a"), queued(th.ID, "cb", "b"), queued(th.ID, "cc", "c")
	for _, q := range []*store.QueuedSubmission{a, b, c} {
		added, err := s.AddQueued(ctx, q)
		require.NoError(t, err)
		require.True(t, added)
	}
	require.Equal(t, []string{a.ID, b.ID, c.ID}, queueIDs(t, s, th.ID))
	require.Empty(t, queueIDs(t, s, other.ID))

	// The same client id adds nothing and answers the stored entry.
	dup := queued(th.ID, "cb", "b again")
	added, err := s.AddQueued(ctx, dup)
	require.NoError(t, err)
	require.False(t, added)
	require.Equal(t, b.ID, dup.ID)
	requireJSONEq(t, b.Payload, dup.Payload)
	require.Len(t, queueIDs(t, s, th.ID), 3)
	// Another thread may use it.
	added, err = s.AddQueued(ctx, queued(other.ID, "cb", "x"))
	require.NoError(t, err)
	require.True(t, added)

	_, err = s.AddQueued(ctx, queued(newID(), "cz", "z"))
	requireCode(t, err, apperr.NotFound)
	_, err = s.AddQueued(ctx, &store.QueuedSubmission{ThreadID: th.ID, ID: newID(), ClientID: "bad\x00", Payload: json.RawMessage(`{}`)})
	requireCode(t, err, apperr.Invalid)

	// Update, reorder, delete.
	require.NoError(t, s.UpdateQueued(ctx, th.ID, b.ID, json.RawMessage(`{"input":[{"type":"text","text":"b2"}]}`)))
	requireCode(t, s.UpdateQueued(ctx, th.ID, "nope", json.RawMessage(`{}`)), apperr.NotFound)
	requireCode(t, s.ReorderQueued(ctx, th.ID, []string{c.ID, a.ID}), apperr.Invalid)
	requireCode(t, s.ReorderQueued(ctx, th.ID, []string{c.ID, a.ID, b.ID, "nope"}), apperr.Invalid)
	requireCode(t, s.ReorderQueued(ctx, th.ID, []string{c.ID, a.ID, a.ID}), apperr.Invalid)
	require.NoError(t, s.ReorderQueued(ctx, th.ID, []string{c.ID, a.ID, b.ID}))
	require.Equal(t, []string{c.ID, a.ID, b.ID}, queueIDs(t, s, th.ID))
	d := queued(th.ID, "cd", "d")
	_, err = s.AddQueued(ctx, d)
	require.NoError(t, err)
	require.Equal(t, []string{c.ID, a.ID, b.ID, d.ID}, queueIDs(t, s, th.ID))
	list, err := s.ListQueued(ctx, th.ID)
	require.NoError(t, err)
	requireJSONEq(t, json.RawMessage(`{"input":[{"type":"text","text":"b2"}]}`), list[2].Payload)
	require.Equal(t, "cb", list[2].ClientID)

	deleted, err := s.DeleteQueued(ctx, th.ID, a.ID)
	require.NoError(t, err)
	require.True(t, deleted)
	deleted, err = s.DeleteQueued(ctx, th.ID, a.ID)
	require.NoError(t, err)
	require.False(t, deleted)
	require.Equal(t, []string{c.ID, b.ID, d.ID}, queueIDs(t, s, th.ID))

	threads, err := s.QueuedThreads(ctx)
	require.NoError(t, err)
	require.Contains(t, threads, th.ID)
	require.Contains(t, threads, other.ID)

	// Deleting the thread deletes its queue.
	require.NoError(t, s.DeleteThread(ctx, th.ID))
	require.Empty(t, queueIDs(t, s, th.ID))
	threads, err = s.QueuedThreads(ctx)
	require.NoError(t, err)
	require.NotContains(t, threads, th.ID)
}

// testQueueTakenOnce: the batch that stores a turn takes its entry; of
// concurrent batches taking one entry, exactly one commits, and a batch
// whose entry is gone writes nothing.
func testQueueTakenOnce(t *testing.T, s store.Store) {
	ctx := context.Background()
	th, _ := createThread(t, s)
	q := queued(th.ID, "c1", "one")
	_, err := s.AddQueued(ctx, q)
	require.NoError(t, err)

	const racers = 4
	var wg sync.WaitGroup
	errs := make([]error, racers)
	turns := make([]*store.Turn, racers)
	for i := range racers {
		turns[i] = newTurn(th.ID)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Write(ctx, &store.Batch{
				CreateTurns: []*store.Turn{turns[i]},
				TakeQueued:  []store.QueueTake{{ThreadID: th.ID, ID: q.ID, TurnID: turns[i].ID}},
			})
		}()
	}
	wg.Wait()
	won, winner := 0, ""
	for i, err := range errs {
		if err == nil {
			won++
			winner = turns[i].ID
			continue
		}
		requireCode(t, err, apperr.Conflict)
	}
	require.Equal(t, 1, won)
	page, err := s.ListTurns(ctx, store.TurnsQuery{ThreadID: th.ID, Limit: store.MaxLimit})
	require.NoError(t, err)
	require.Len(t, page.Turns, 2) // createThread's and the winner's
	require.Empty(t, queueIDs(t, s, th.ID))
	threads, err := s.QueuedThreads(ctx)
	require.NoError(t, err)
	require.NotContains(t, threads, th.ID)
	// The taken entry stays behind its client id: a retried add finds it,
	// with its turn, and queues nothing.
	retry := queued(th.ID, "c1", "one")
	added, err := s.AddQueued(ctx, retry)
	require.NoError(t, err)
	require.False(t, added)
	require.Equal(t, q.ID, retry.ID)
	require.Equal(t, winner, retry.TurnID)
	require.Empty(t, queueIDs(t, s, th.ID))
	deleted, err := s.DeleteQueued(ctx, th.ID, q.ID)
	require.NoError(t, err)
	require.False(t, deleted, "a taken entry is not queued")
	requireCode(t, s.UpdateQueued(ctx, th.ID, q.ID, json.RawMessage(`{}`)), apperr.NotFound)
	requireCode(t, s.Write(ctx, &store.Batch{TakeQueued: []store.QueueTake{{ThreadID: th.ID, ID: q.ID}}}), apperr.Invalid)

	// Through the group committer too: the culprit alone fails.
	g := store.NewGroupCommitter(nopCloser{s}, store.GroupCommitConfig{})
	defer g.Close()
	ok := newTurn(th.ID)
	errc := make(chan error, 2)
	go func() {
		late := newTurn(th.ID)
		errc <- g.Write(ctx, &store.Batch{CreateTurns: []*store.Turn{late}, TakeQueued: []store.QueueTake{{ThreadID: th.ID, ID: q.ID, TurnID: late.ID}}})
	}()
	go func() { errc <- g.Write(ctx, &store.Batch{CreateTurns: []*store.Turn{ok}}) }()
	var failed int
	for range 2 {
		if err := <-errc; err != nil {
			requireCode(t, err, apperr.Conflict)
			failed++
		}
	}
	require.Equal(t, 1, failed)
	_, err = s.GetTurn(ctx, th.ID, ok.ID)
	require.NoError(t, err)
}
