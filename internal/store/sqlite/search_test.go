package sqlite_test

import (
	"database/sql"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/migrations"
)

// The message index covers the messages stored before its migration ran,
// folds case beyond ASCII, and stays consistent when threads are deleted.
func TestSearchIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "appserver.db")
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	fsys, err := fs.Sub(migrations.FS, "sqlite")
	require.NoError(t, err)
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithDisableGlobalRegistry(true))
	require.NoError(t, err)
	_, err = p.UpTo(t.Context(), 3)
	require.NoError(t, err)

	// A database of the previous schema with one message of each kind.
	const old, other = "0190a5b2-0000-7000-8000-000000000001", "0190a5b2-0000-7000-8000-000000000002"
	for _, id := range []string{old, other} {
		_, err = db.Exec(`INSERT INTO threads (id, cwd, model_provider, source, created_at, updated_at, recency_at) VALUES (?, '/', 'openai', 'cli', 1, 1, 1)`, id)
		require.NoError(t, err)
		_, err = db.Exec(`INSERT INTO turns (thread_id, id, seq, status) VALUES (?, 't', 1, 'completed')`, id)
		require.NoError(t, err)
	}
	_, err = db.Exec(`INSERT INTO items (thread_id, seq, turn_id, item_id, type, payload, created_at) VALUES
		(?, 1, 't', 'u', 'userMessage', '{"type":"userMessage","content":[{"type":"text","text":"Ärger im BÜRO"}]}', 1),
		(?, 2, 't', 'a', 'agentMessage', '{"type":"agentMessage","text":"a Wombat burrow"}', 1),
		(?, 1, 't', 'a', 'agentMessage', '{"type":"agentMessage","text":"nothing here"}', 1)`, old, old, other)
	require.NoError(t, err)

	s := open(t, path, true)
	search := func(term string) []string {
		page, err := s.ListThreads(t.Context(), store.ListThreadsQuery{SearchTerm: term})
		require.NoError(t, err)
		var ids []string
		for _, th := range page.Threads {
			ids = append(ids, th.ID)
		}
		return ids
	}
	require.Equal(t, []string{old}, search("wombat"), "indexed by the migration")
	require.Equal(t, []string{old}, search("ärger im büro"), "Unicode case folded")
	require.Equal(t, []string{other}, search("nothing"))

	require.NoError(t, s.DeleteThread(t.Context(), old))
	require.Empty(t, search("wombat"))
	var rows int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM item_text`).Scan(&rows))
	require.Equal(t, 1, rows, "a deleted thread's text is dropped")
	_, err = db.Exec(`INSERT INTO item_text_fts (item_text_fts) VALUES ('integrity-check')`)
	require.NoError(t, err, "the index matches its content table")
}
