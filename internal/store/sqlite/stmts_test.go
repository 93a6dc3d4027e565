package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

// TestWriterStatementsAreCached shows that a write parses a statement only
// the first time: afterwards the writer runs it prepared, and later writes
// of the same shapes add nothing to the cache; Close releases them.
func TestWriterStatementsAreCached(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "a.db"), Migrate: true})
	require.NoError(t, err)
	const th = "0190a5b2-0000-7000-8000-0000000000c1"
	require.NoError(t, s.Write(ctx, &store.Batch{
		CreateThreads: []*store.Thread{{ID: th, Cwd: "/w", ModelProvider: "p", Source: "cli"}},
		CreateTurns:   []*store.Turn{{ThreadID: th, ID: "t1", Status: store.TurnInProgress}},
	}))
	round := func(i string) *store.Batch {
		return &store.Batch{
			AppendItems:   []*store.Item{{ThreadID: th, TurnID: "t1", ItemID: "i" + i, Type: "x", Payload: []byte(`{}`)}},
			UpdateThreads: []store.ThreadPatch{{ID: th, Meta: []byte(`{"n":` + i + `}`)}},
			UpdateTurns:   []store.TurnPatch{{ThreadID: th, ID: "t1", Meta: []byte(`{"history":[]}`)}},
		}
	}
	require.NoError(t, s.Write(ctx, round("1")))
	cached := len(s.stmts.m)
	// insert thread, insert turn, the turn counter's bump, insert item,
	// the thread's patch with the item counter's bump, the turn's patch.
	require.Equal(t, 6, cached)
	turnPatch, _ := statements.TurnPatch(store.TurnPatch{Meta: []byte(`{}`)})
	threadUpdate, _ := statements.ThreadUpdate(th, &store.ThreadPatch{Meta: []byte(`{}`)}, 0, 1)
	for _, q := range []string{statements.InsertItem, threadUpdate, turnPatch} {
		require.NotNil(t, s.stmts.get(q), "%s", q)
	}
	require.NoError(t, s.Write(ctx, round("2")))
	require.Equal(t, cached, len(s.stmts.m), "a write of the same shapes prepares nothing new")

	w := &txWriter{ctx: ctx, cache: s.stmts}
	tx, err := s.w.BeginTx(ctx, nil)
	require.NoError(t, err)
	w.tx = tx
	p, err := backend.NewPlan(round("3"), time.Now())
	require.NoError(t, err)
	require.NoError(t, writePlan(w, p))
	require.NoError(t, tx.Commit())
	require.Empty(t, w.missed, "every statement of the third write ran prepared")

	items, err := s.ListItems(ctx, store.ItemsQuery{ThreadID: th})
	require.NoError(t, err)
	require.Len(t, items.Items, 3)

	require.NoError(t, s.Close())
	require.Empty(t, s.stmts.m)
}

// TestReadsArePrepared shows that a read is parsed once: the read pool
// keeps its statement, a second read of the same shape reuses it and adds
// nothing, reads of the writer's pool have a cache of their own that
// leaves the writer's statements alone, and Close releases them all.
func TestReadsArePrepared(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "a.db"), Migrate: true})
	require.NoError(t, err)
	const th = "0190a5b2-0000-7000-8000-0000000000c2"
	require.NoError(t, s.Write(ctx, &store.Batch{
		CreateThreads: []*store.Thread{{ID: th, Cwd: "/w", ModelProvider: "p", Source: "cli"}},
		CreateTurns:   []*store.Turn{{ThreadID: th, ID: "t1", Status: store.TurnInProgress}},
	}))
	writes := len(s.stmts.m)

	rec, err := s.GetThread(ctx, th)
	require.NoError(t, err)
	require.Equal(t, th, rec.ID)
	require.Len(t, s.rstmts.m, 1, "the read was not prepared")
	var first *sql.Stmt
	for _, st := range s.rstmts.m {
		first = st
	}
	_, err = s.GetThread(ctx, th)
	require.NoError(t, err)
	require.Len(t, s.rstmts.m, 1)
	for _, st := range s.rstmts.m {
		require.Same(t, first, st, "the second read prepared its statement again")
	}
	turns, err := s.ListTurns(ctx, store.TurnsQuery{ThreadID: th, Desc: true, Limit: 2})
	require.NoError(t, err)
	require.Len(t, turns.Turns, 1)
	require.Len(t, s.rstmts.m, 2)

	queued, err := s.ListQueued(ctx, th)
	require.NoError(t, err)
	require.Empty(t, queued)
	require.NotEmpty(t, s.wrstmts.m, "a read of the writer's pool was not prepared")
	require.Equal(t, writes, len(s.stmts.m), "a read took a place in the writer's cache")

	require.NoError(t, s.Close())
	require.Empty(t, s.rstmts.m)
	require.Empty(t, s.wrstmts.m)
}
