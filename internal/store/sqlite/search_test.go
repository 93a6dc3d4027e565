package sqlite_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/store/storetest"
)

// The message index covers the messages stored before its migration ran,
// folds case beyond ASCII, and stays consistent when threads are deleted.
func TestSearchIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "appserver.db")
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	p := storetest.Migrations(t, db, "sqlite")
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

// Stored messages reach item_text and the search index after their
// commit, in batches of the store's own; a search finds them before that,
// folded as the index folds, and the index stays consistent through
// deletions, ids reused, and the migrations' way down and up.
func TestMessagesIndexedAfterTheirCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "appserver.db")
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, Migrate: true, IndexDelay: -1})
	require.NoError(t, err)
	defer s.Close()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	ctx := t.Context()
	search := func(term string) []string {
		t.Helper()
		page, err := s.ListThreads(ctx, store.ListThreadsQuery{SearchTerm: term})
		require.NoError(t, err)
		var ids []string
		for _, th := range page.Threads {
			ids = append(ids, th.ID)
		}
		return ids
	}
	// The two marks and what is past them: the last item extracted and
	// the last item; the last item_text row indexed and the last row.
	type marks struct{ extracted, lastItem, indexed, lastText int64 }
	mark := func() (m marks) {
		t.Helper()
		require.NoError(t, db.QueryRow(`SELECT (SELECT through FROM item_text_extracted), (SELECT coalesce(max(rowid), 0) FROM items),
			(SELECT through FROM item_text_indexed), (SELECT coalesce(max(id), 0) FROM item_text)`).Scan(&m.extracted, &m.lastItem, &m.indexed, &m.lastText))
		return m
	}
	consistent := func() {
		t.Helper()
		_, err := db.Exec(`INSERT INTO item_text_fts (item_text_fts) VALUES ('integrity-check')`)
		require.NoError(t, err, "the index is sound")
		if m := mark(); m.indexed >= m.lastText {
			// With every row indexed, the index against its content.
			_, err = db.Exec(`INSERT INTO item_text_fts (item_text_fts, rank) VALUES ('integrity-check', 1)`)
			require.NoError(t, err, "the index matches its content table")
		}
	}
	seq := map[string]int64{}
	item := func(thread, typ, payload string) {
		t.Helper()
		var b store.Batch
		if seq[thread] == 0 {
			b.CreateThreads = []*store.Thread{{ID: thread, Cwd: "/", ModelProvider: "openai", Source: "cli"}}
			b.CreateTurns = []*store.Turn{{ThreadID: thread, ID: "t", Status: store.TurnCompleted}}
		}
		seq[thread]++
		b.AppendItems = []*store.Item{{ThreadID: thread, TurnID: "t", ItemID: fmt.Sprint("i", seq[thread]), Type: typ, Payload: json.RawMessage(payload)}}
		require.NoError(t, s.Write(ctx, &b))
	}
	message := func(thread, typ, text string) {
		t.Helper()
		payload := fmt.Sprintf(`{"type":"agentMessage","text":%q}`, text)
		if typ == "userMessage" {
			payload = fmt.Sprintf(`{"type":"userMessage","content":[{"type":"text","text":%q}]}`, text)
		}
		item(thread, typ, payload)
	}
	const a, b, c = "0190a5b2-0000-7000-8000-00000000000a", "0190a5b2-0000-7000-8000-00000000000b", "0190a5b2-0000-7000-8000-00000000000c"

	message(a, "agentMessage", "a Wombat burrow")
	message(a, "userMessage", "Ärger im BÜRO")
	// Items that give no text: another kind, a user message whose
	// content holds no text input or something else than objects.
	item(a, "commandExecution", `{"type":"commandExecution","command":"wombat","aggregatedOutput":"wombat"}`)
	item(a, "userMessage", `{"type":"userMessage","content":["a wombat string",{"type":"image","url":"x"},{"type":"text","text":7}]}`)
	m := mark()
	require.Less(t, m.extracted, m.lastItem, "not extracted by the commit")
	require.Zero(t, m.lastText, "no text stored by the commit")
	require.Equal(t, []string{a}, search("wombat"), "found before it is extracted")
	require.Equal(t, []string{a}, search("ärger im büro"), "folded beyond ASCII before it is extracted")
	require.Equal(t, []string{a}, search("IM"), "a short term, before it is extracted")
	require.Empty(t, search("nowhere"))
	require.Empty(t, search("string"), "a content element that is no object has no text")

	n, err := s.IndexMessages(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	m = mark()
	require.Equal(t, m.lastItem, m.extracted)
	require.Equal(t, m.lastText, m.indexed)
	require.Equal(t, []string{a}, search("wombat"), "found through the index")
	require.Equal(t, []string{a}, search("ärger im büro"))
	require.Equal(t, []string{a}, search("IM"))
	require.Empty(t, search("string"))
	consistent()

	// A thread with indexed rows and items past the mark goes whole.
	message(a, "agentMessage", "another wombat")
	message(b, "agentMessage", "the last row")
	require.NoError(t, s.DeleteThread(ctx, a))
	require.Empty(t, search("wombat"))
	consistent()
	_, err = s.IndexMessages(ctx)
	require.NoError(t, err)
	m = mark()
	require.Equal(t, m.lastItem, m.extracted)
	require.GreaterOrEqual(t, m.indexed, m.lastText, "the other thread's row is indexed (its id may have been reused at or below the mark)")
	require.Equal(t, []string{b}, search("last row"))
	consistent()

	// The greatest items and rows deleted, their ids come back at or
	// below the marks: such an item is extracted, and its row indexed, by
	// its own commit.
	require.NoError(t, s.DeleteThread(ctx, b))
	message(c, "agentMessage", "a reused id")
	item(c, "userMessage", `{"type":"userMessage","content":["a bare string",{"type":"text","text":"tucked away"}]}`)
	m = mark()
	require.LessOrEqual(t, m.lastItem, m.extracted)
	require.LessOrEqual(t, m.lastText, m.indexed)
	require.Equal(t, []string{c}, search("reused"))
	require.Equal(t, []string{c}, search("tucked"), "the trigger extracts a user message whose content holds something else than objects")
	require.Empty(t, search("bare string"))
	n, err = s.IndexMessages(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	consistent()

	// Down and up again with an item past the mark: the way down
	// extracts and indexes it.
	message(c, "agentMessage", "a numbat den")
	p := storetest.Migrations(t, db, "sqlite")
	_, err = p.DownTo(ctx, 13)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO item_text_fts (item_text_fts, rank) VALUES ('integrity-check', 1)`)
	require.NoError(t, err, "the way down indexed every row")
	var hits int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM item_text_fts WHERE item_text_fts MATCH '"numbat"'`).Scan(&hits))
	require.Equal(t, 1, hits)
	_, err = p.Up(ctx)
	require.NoError(t, err)
	m = mark()
	require.Equal(t, m.lastItem, m.extracted)
	require.Equal(t, m.lastText, m.indexed)
	require.Equal(t, []string{c}, search("numbat"))
	consistent()
}

// The store indexes stored messages by itself a short while after their
// commit.
func TestIndexerCatchesUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "appserver.db")
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, Migrate: true, IndexDelay: time.Millisecond})
	require.NoError(t, err)
	defer s.Close()
	const id = "0190a5b2-0000-7000-8000-00000000000d"
	require.NoError(t, s.Write(t.Context(), &store.Batch{
		CreateThreads: []*store.Thread{{ID: id, Cwd: "/", ModelProvider: "openai", Source: "cli"}},
		CreateTurns:   []*store.Turn{{ThreadID: id, ID: "t", Status: store.TurnCompleted}},
		AppendItems:   []*store.Item{{ThreadID: id, TurnID: "t", ItemID: "i", Type: "agentMessage", Payload: json.RawMessage(`{"type":"agentMessage","text":"indexed soon"}`)}},
	}))
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	require.Eventually(t, func() bool {
		var through, last int64
		err := db.QueryRow(`SELECT through, (SELECT max(id) FROM item_text) FROM item_text_indexed`).Scan(&through, &last)
		return err == nil && through == last
	}, 10*time.Second, 5*time.Millisecond, "extracted and indexed")
}

// An extraction batch ends before the first message item that starts
// past 1 MiB of message JSON, and an indexing batch before the first row
// that starts past 1 MiB of text, whatever their counts: four messages of
// 400 KB go in batches of three and one, and the batch that takes the
// last one says none is left (a pass makes no empty transaction after it).
func TestIndexBatchesBoundedByBytes(t *testing.T) {
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "appserver.db"), Migrate: true, IndexDelay: -1})
	require.NoError(t, err)
	defer s.Close()
	const id = "0190a5b2-0000-7000-8000-00000000000e"
	b := &store.Batch{
		CreateThreads: []*store.Thread{{ID: id, Cwd: "/", ModelProvider: "openai", Source: "cli"}},
		CreateTurns:   []*store.Turn{{ThreadID: id, ID: "t", Status: store.TurnCompleted}},
	}
	for i := range 4 {
		text := fmt.Sprintf("wombat%d ", i) + strings.Repeat("x", 400<<10)
		payload, err := json.Marshal(map[string]string{"type": "agentMessage", "text": text})
		require.NoError(t, err)
		b.AppendItems = append(b.AppendItems, &store.Item{ThreadID: id, TurnID: "t", ItemID: fmt.Sprint("i", i), Type: "agentMessage", Payload: payload})
	}
	require.NoError(t, s.Write(t.Context(), b))
	batches := []struct {
		n    int
		more bool
	}{{3, true}, {1, false}, {0, false}}
	for _, want := range batches {
		n, more, err := s.ExtractBatch(t.Context())
		require.NoError(t, err)
		require.Equal(t, want.n, n, "items extracted")
		require.Equal(t, want.more, more)
	}
	for _, want := range batches {
		n, more, err := s.IndexBatch(t.Context())
		require.NoError(t, err)
		require.Equal(t, want.n, n, "rows indexed")
		require.Equal(t, want.more, more)
	}
	page, err := s.ListThreads(t.Context(), store.ListThreadsQuery{SearchTerm: "wombat3"})
	require.NoError(t, err)
	require.Len(t, page.Threads, 1)
}
