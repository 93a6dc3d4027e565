package postgres

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/pgtest"
)

// trips records the round trips the pool's connections make: a batch is
// one, a statement sent alone another.
type trips struct {
	mu    sync.Mutex
	alone []string // statements sent alone, pings left out
	first []string // the first statement of each batch
}

func (r *trips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !strings.HasPrefix(d.SQL, "-- ping") {
		r.mu.Lock()
		r.alone = append(r.alone, d.SQL)
		r.mu.Unlock()
	}
	return ctx
}

func (r *trips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *trips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	r.mu.Lock()
	r.first = append(r.first, d.Batch.QueuedQueries[0].SQL)
	r.mu.Unlock()
	return ctx
}

func (r *trips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *trips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (r *trips) take() (alone, first []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	alone, first = r.alone, r.first
	r.alone, r.first = nil, nil
	return alone, first
}

// A write is three round trips: BEGIN rides the first batch, COMMIT is
// sent alone; a write that fails rolls back.
func TestWriteRoundTrips(t *testing.T) {
	tr := &trips{}
	s, err := Open(t.Context(), Config{URL: pgtest.URL(t), MaxConns: 1, Migrate: true, tracer: tr})
	require.NoError(t, err)
	defer s.Close()
	tr.take()

	th := &store.Thread{ID: "0190a5b2-0000-7000-8000-000000000002", Cwd: "/", ModelProvider: "openai", Source: "cli"}
	require.NoError(t, s.Write(t.Context(), &store.Batch{CreateThreads: []*store.Thread{th}}))
	alone, first := tr.take()
	require.Equal(t, []string{"COMMIT"}, alone)
	require.Len(t, first, 1, "a thread alone needs no second batch")
	require.Equal(t, "BEGIN", first[0])

	turn := &store.Turn{ThreadID: th.ID, ID: "turn-1", Status: "inProgress"}
	require.NoError(t, s.Write(t.Context(), &store.Batch{CreateTurns: []*store.Turn{turn}}))
	alone, first = tr.take()
	require.Equal(t, []string{"COMMIT"}, alone)
	require.Len(t, first, 2)
	require.Equal(t, "BEGIN", first[0])

	// A turn of a thread that does not exist: rolled back, and the one
	// connection is usable again.
	err = s.Write(t.Context(), &store.Batch{CreateTurns: []*store.Turn{{ThreadID: "0190a5b2-0000-7000-8000-000000000009", ID: "turn-2", Status: "inProgress"}}})
	require.Equal(t, apperr.NotFound, apperr.CodeOf(err), "%v", err)
	alone, _ = tr.take()
	require.Equal(t, []string{"ROLLBACK"}, alone)
	got, err := s.GetThread(t.Context(), th.ID)
	require.NoError(t, err)
	require.Equal(t, th.ID, got.ID)
}
