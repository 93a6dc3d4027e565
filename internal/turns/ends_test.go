package turns

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// fencedOutStore refuses its first writes as a lease fence does (Conflict)
// and takes the next ones, recording the turn patches it took.
type fencedOutStore struct {
	store.Store // nil: turnEnds only writes

	mu      sync.Mutex
	refuse  int // writes still refused
	refused int
	taken   []store.TurnPatch
}

func (s *fencedOutStore) Write(_ context.Context, b *store.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse > 0 {
		s.refuse--
		s.refused++
		return apperr.New(apperr.Conflict, "thread lease lost: another node owns the thread now")
	}
	s.taken = append(s.taken, b.UpdateTurns...)
	return nil
}

// A turn end written again after a store outage may meet the fence of a
// lease this daemon lost meanwhile (another turn of the thread holds that
// lost token until it lets go of the thread). The end is kept and written
// once the fence is gone, not dropped: dropped, the turn would stay
// inProgress until a failover scan stored it interrupted, although its
// client was told it failed.
func TestTurnEndRetriedThroughAFence(t *testing.T) {
	st := &fencedOutStore{refuse: 2}
	ends := newTurnEnds(slog.New(slog.DiscardHandler), nil, "")
	t.Cleanup(ends.Stop)
	now := time.Now()
	failed := store.TurnPatch{ThreadID: "thread", ID: "turn", Status: store.TurnFailed, CompletedAt: &now}
	ends.add(st, failed)

	require.Eventually(t, func() bool {
		_, waiting := ends.told("thread", "turn")
		return !waiting
	}, 10*time.Second, 10*time.Millisecond, "the end is still pending")
	st.mu.Lock()
	defer st.mu.Unlock()
	require.Equal(t, 2, st.refused, "the fence refused the first attempts")
	require.Len(t, st.taken, 1, "the end the client was told is stored, not dropped")
	require.Equal(t, store.TurnFailed, st.taken[0].Status)
}

// An end whose turn is gone (NotFound) is dropped: no attempt can store it,
// and the ends queued after it are written.
func TestTurnEndDroppedWhenItsTurnIsGone(t *testing.T) {
	gone := &goneStore{}
	ok := &fencedOutStore{}
	ends := newTurnEnds(slog.New(slog.DiscardHandler), nil, "")
	t.Cleanup(ends.Stop)
	now := time.Now()
	ends.add(gone, store.TurnPatch{ThreadID: "a", ID: "gone", Status: store.TurnFailed, CompletedAt: &now})
	ends.add(ok, store.TurnPatch{ThreadID: "b", ID: "kept", Status: store.TurnFailed, CompletedAt: &now})
	require.Eventually(t, func() bool {
		ok.mu.Lock()
		defer ok.mu.Unlock()
		return len(ok.taken) == 1
	}, 10*time.Second, 10*time.Millisecond, "the end queued behind a dropped one is stored")
	_, waiting := ends.told("a", "gone")
	require.False(t, waiting)
}

// goneStore answers every write NotFound.
type goneStore struct{ store.Store }

func (goneStore) Write(context.Context, *store.Batch) error {
	return apperr.New(apperr.NotFound, "turn not found")
}
