package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/pgtest"
)

// During an outage every operation fails as Unavailable with the message
// clients get, "storage unavailable": on connections cut mid-use, on
// connections refused, and when the caller's deadline runs out first. The
// store works again once the database is back.
func TestOutageIsUnavailable(t *testing.T) {
	proxy := pgtest.NewProxy(t, pgtest.URL(t))
	s := open(t, proxy.URL(), true)
	ctx := t.Context()
	threadID := uuid.NewString()
	require.NoError(t, s.Write(ctx, &store.Batch{
		CreateThreads: []*store.Thread{{ID: threadID, Cwd: "/w", ModelProvider: "p", Source: "cli"}},
		CreateTurns:   []*store.Turn{{ThreadID: threadID, ID: "turn1", Status: store.TurnInProgress}},
	}))
	ops := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"write", func(ctx context.Context) error {
			return s.Write(ctx, &store.Batch{UpdateTurns: []store.TurnPatch{{ThreadID: threadID, ID: "turn1", Status: store.TurnFailed}}})
		}},
		{"get thread", func(ctx context.Context) error { _, err := s.GetThread(ctx, threadID); return err }},
		{"list threads", func(ctx context.Context) error { _, err := s.ListThreads(ctx, store.ListThreadsQuery{}); return err }},
		{"get turn", func(ctx context.Context) error { _, err := s.GetTurn(ctx, threadID, "turn1"); return err }},
		{"list turns", func(ctx context.Context) error {
			_, err := s.ListTurns(ctx, store.TurnsQuery{ThreadID: threadID})
			return err
		}},
		{"get item", func(ctx context.Context) error { _, err := s.GetItem(ctx, threadID, "item1"); return err }},
		{"list items", func(ctx context.Context) error {
			_, err := s.ListItems(ctx, store.ItemsQuery{ThreadID: threadID})
			return err
		}},
		{"list in-progress turns", func(ctx context.Context) error { _, err := s.ListInProgressTurns(ctx); return err }},
		{"ping", func(ctx context.Context) error { return s.Ping(ctx) }},
	}
	requireUnavailable := func(t *testing.T, what string, err error) {
		t.Helper()
		require.Error(t, err, what)
		require.Equal(t, apperr.Unavailable, apperr.CodeOf(err), "%s: %v", what, err)
		require.Equal(t, "storage unavailable", apperr.MessageOf(err), "%s: %v", what, err)
	}
	// The pool holds connections from before: the first round meets them
	// cut, the second finds nothing listening.
	proxy.Down()
	for round := range 2 {
		for _, op := range ops {
			requireUnavailable(t, op.name, op.run(ctx))
		}
		_ = round
	}
	// A deadline that ends before the database answers.
	for _, op := range ops {
		short, cancel := context.WithTimeout(ctx, time.Millisecond)
		time.Sleep(2 * time.Millisecond)
		requireUnavailable(t, op.name+" past its deadline", op.run(short))
		cancel()
	}

	proxy.Up()
	for _, op := range ops {
		err := op.run(ctx)
		if op.name == "get item" {
			require.Equal(t, apperr.NotFound, apperr.CodeOf(err), "%v", err)
			continue
		}
		require.NoError(t, err, "%s after the outage", op.name)
	}
}
