package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/storetest"
)

// A database at migration 00011 (before events shared rows, before the
// numbering reservations and the message index off the commit), holding a
// thread with a turn, its messages, events one per row and an audit entry,
// upgrades to the current schema with all of it readable: the events come
// back one by one with their frames and times, new events append past
// them, a reservation starts past the stored numbers, and the messages are
// found by search.
func TestUpgradeFromMigration11(t *testing.T) {
	path := filepath.Join(t.TempDir(), "appserver.db")
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	_, err = storetest.Migrations(t, db, "sqlite").UpTo(t.Context(), 11)
	require.NoError(t, err)

	const thread = "0190a5b2-0000-7000-8000-0000000000d1"
	at := storetest.OldEventTime(0)
	_, err = db.Exec(`INSERT INTO threads (id, cwd, model_provider, source, created_at, updated_at, recency_at) VALUES (?, '/', 'openai', 'cli', 1, 1, 1)`, thread)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO turns (thread_id, id, seq, status) VALUES (?, 't', 1, 'completed')`, thread)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO items (thread_id, seq, turn_id, item_id, type, payload, created_at) VALUES
		(?, 1, 't', 'u', 'userMessage', '{"type":"userMessage","content":[{"type":"text","text":"where is the numbat"}]}', 1),
		(?, 2, 't', 'a', 'agentMessage', '{"type":"agentMessage","text":"under the log"}', 1)`, thread, thread)
	require.NoError(t, err)
	for seq := 1; seq <= 5; seq++ {
		_, err = db.Exec(`INSERT INTO events (thread_id, seq, method, data, created_at) VALUES (?, ?, 'item/completed', ?, ?)`,
			thread, seq, []byte(storetest.OldEventFrame(seq)), storetest.OldEventTime(seq).UnixMicro())
		require.NoError(t, err)
	}
	_, err = db.Exec(`INSERT INTO audit_log (at, kind, principal, client, node, trace_id, thread_id, turn_id, detail) VALUES (?, 'approval', 'alice', 'tui', 'n1', '', ?, 't', '{"decision":"accept"}')`,
		at.UnixMicro(), thread)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	s := open(t, path, true)
	ctx := t.Context()
	storetest.UpgradedEvents(t, s, thread)

	entries, err := s.ListAudit(ctx, store.AuditQuery{ThreadID: thread})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "alice", entries[0].Principal)
	require.Equal(t, "approval", entries[0].Kind)

	require.Eventually(t, func() bool {
		page, err := s.ListThreads(ctx, store.ListThreadsQuery{SearchTerm: "numbat"})
		return err == nil && len(page.Threads) == 1 && page.Threads[0].ID == thread
	}, 10*time.Second, 20*time.Millisecond, "the old messages are found by search")
	turn, err := s.GetTurn(ctx, thread, "t")
	require.NoError(t, err)
	require.Equal(t, store.TurnCompleted, turn.Status)
}
