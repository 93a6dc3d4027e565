package sqlite_test

import (
	"cmp"
	"database/sql"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func open(t *testing.T, path string, migrate bool) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, Migrate: migrate})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "appserver.db"), true)
	})
}

func TestMigrateFromEmpty(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "appserver.db"), false)
	_, err := s.ListInProgressTurns(t.Context())
	require.Error(t, err, "an empty database has no tables")
	require.NoError(t, s.Migrate(t.Context()))
	turns, err := s.ListInProgressTurns(t.Context())
	require.NoError(t, err)
	require.Empty(t, turns)
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "appserver.db")
	s := open(t, path, true)
	th := &store.Thread{ID: "0190a5b2-0000-7000-8000-000000000001", Cwd: "/", ModelProvider: "openai", Source: "cli"}
	require.NoError(t, s.Write(t.Context(), &store.Batch{CreateThreads: []*store.Thread{th}}))
	require.NoError(t, s.Close())

	s = open(t, path, true)
	got, err := s.GetThread(t.Context(), th.ID)
	require.NoError(t, err)
	require.Equal(t, th.CreatedAt, got.CreatedAt)
}

func TestOpenInvalid(t *testing.T) {
	for _, path := range []string{"", ":memory:", "file::memory:?cache=shared"} {
		_, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
		require.Equal(t, apperr.Invalid, apperr.CodeOf(err), "path %q: %v", path, err)
	}
	_, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "missing", "dir", "x.db")})
	require.Equal(t, apperr.Unavailable, apperr.CodeOf(err), "error: %v", err)
}

func TestConfigHooks(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	var mu sync.Mutex
	seen := map[string][]apperr.Code{}
	s, err := sqlite.Open(t.Context(), sqlite.Config{
		Path:    filepath.Join(t.TempDir(), "appserver.db"),
		Migrate: true,
		Now:     func() time.Time { return now },
		Observe: func(op string, d time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			seen[op] = append(seen[op], apperr.CodeOf(err))
		},
	})
	require.NoError(t, err)
	defer s.Close()

	th := &store.Thread{ID: "0190a5b2-0000-7000-8000-000000000002", Cwd: "/", ModelProvider: "openai", Source: "cli"}
	require.NoError(t, s.Write(t.Context(), &store.Batch{CreateThreads: []*store.Thread{th}}))
	require.Equal(t, now, th.CreatedAt, "the injected clock defaults timestamps")
	_, err = s.GetThread(t.Context(), "0190a5b2-0000-7000-8000-000000000003")
	require.Error(t, err)
	require.NoError(t, s.Ping(t.Context()))

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []apperr.Code{""}, seen[store.OpWrite])
	require.Equal(t, []apperr.Code{apperr.NotFound}, seen[store.OpGetThread])
	require.Equal(t, []apperr.Code{""}, seen[store.OpPing])
}

// fileSize is the bytes of a database with its WAL.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// Pruning events and reclaiming shrinks the file: the database is in
// incremental auto-vacuum mode, new or migrated.
func TestReclaimShrinksTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "appserver.db")
	s := open(t, path, true)
	ctx := t.Context()
	th := &store.Thread{ID: "0190a5b2-0000-7000-8000-000000000001", Cwd: "/", ModelProvider: "openai", Source: "cli"}
	require.NoError(t, s.Write(ctx, &store.Batch{CreateThreads: []*store.Thread{th}}))
	data := []byte(`{"delta":"` + strings.Repeat("x", 32<<10) + `"}`)
	for seq := int64(1); seq <= 640; seq += 64 { // 20 MiB
		var evs []*store.Event
		for i := range int64(64) {
			evs = append(evs, &store.Event{ThreadID: th.ID, Seq: seq + i, Method: "item/commandExecution/outputDelta", Data: data})
		}
		require.NoError(t, s.Write(ctx, &store.Batch{AppendEvents: evs}))
	}
	require.NoError(t, s.Reclaim(ctx))
	full := fileSize(t, path)
	require.Greater(t, full, int64(20<<20))

	_, remaining, err := s.PruneThreadEvents(ctx, th.ID, 1<<20, 10_000)
	require.NoError(t, err)
	require.LessOrEqual(t, remaining, int64(1<<20))
	require.NoError(t, s.Reclaim(ctx))
	pruned := fileSize(t, path)
	t.Logf("%d bytes with 20 MiB of events, %d after pruning to 1 MiB", full, pruned)
	require.Less(t, pruned, int64(4<<20), "the file gave the pruned pages back")
}

// A database made before incremental auto-vacuum is rewritten once by
// Migrate, keeping its data.
func TestMigrateTurnsOnIncrementalVacuum(t *testing.T) {
	path := filepath.Join(t.TempDir(), "appserver.db")
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = db.Exec("CREATE TABLE old (x TEXT)")
	require.NoError(t, err)
	_, err = db.Exec("INSERT INTO old VALUES ('kept')")
	require.NoError(t, err)
	var mode int
	require.NoError(t, db.QueryRow("PRAGMA auto_vacuum").Scan(&mode))
	require.Zero(t, mode, "SQLite's default: no auto-vacuum")
	require.NoError(t, db.Close())

	s := open(t, path, true)
	require.NoError(t, s.Close())
	db, err = sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.QueryRow("PRAGMA auto_vacuum").Scan(&mode))
	require.Equal(t, 2, mode, "incremental")
	var x string
	require.NoError(t, db.QueryRow("SELECT x FROM old").Scan(&x))
	require.Equal(t, "kept", x)
}

// The events of one thread that one commit carries take one row of the
// log (a plain turn's commit carries about seven), whatever numbers they
// skip: the store's cost of the event log is per row. A frame that cannot
// share a row takes its own, and so does one past more skipped numbers
// than a row's bound.
func TestEventsOfOneCommitShareARow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "appserver.db")
	s := open(t, path, true)
	const thread = "0190a5b2-0000-7000-8000-0000000000e1"
	frame := func(method string, seq int64) []byte {
		return []byte(`{"method":"` + method + `","params":{"threadId":"` + thread + `","n":` + strconv.FormatInt(seq, 10) + `},"emittedAtMs":1}`)
	}
	var evs []*store.Event
	for seq := int64(1); seq <= 7; seq++ {
		evs = append(evs, &store.Event{ThreadID: thread, Seq: seq, Method: "item/completed", Data: frame("item/completed", seq)})
	}
	require.NoError(t, s.Write(t.Context(), &store.Batch{AppendEvents: evs}))
	// Then one whose frame has a newline byte, between two that could join.
	multiline := &store.Event{ThreadID: thread, Seq: 9, Method: "m", Data: []byte("{\"method\":\"m\",\n\"params\":{}}")}
	require.NoError(t, s.Write(t.Context(), &store.Batch{AppendEvents: []*store.Event{
		{ThreadID: thread, Seq: 8, Method: "m", Data: frame("m", 8)}, multiline, {ThreadID: thread, Seq: 10, Method: "m", Data: frame("m", 10)},
	}}))
	// Then a commit's events with numbers between them it does not carry
	// (a turn's end: its answer's start, a delta only numbered, its
	// completion, usage and end), and one far past them, whose skipped
	// numbers would make the row longer than the bound.
	var skipping []*store.Event
	for _, seq := range []int64{11, 13, 14, 17, 17 + sqlite.MaxEventRow} {
		skipping = append(skipping, &store.Event{ThreadID: thread, Seq: seq, Method: "item/completed", Data: frame("item/completed", seq)})
	}
	require.NoError(t, s.Write(t.Context(), &store.Batch{AppendEvents: skipping}))
	got, err := s.ListEvents(t.Context(), thread, 0, 100)
	require.NoError(t, err)
	require.Len(t, got, 15)
	require.Equal(t, string(multiline.Data), string(got[8].Data))
	for i, seq := range []int64{11, 13, 14, 17, 17 + sqlite.MaxEventRow} {
		require.Equal(t, seq, got[10+i].Seq)
		require.Equal(t, string(frame("item/completed", seq)), string(got[10+i].Data))
	}
	require.NoError(t, s.Close())

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	type row struct{ first, last int64 }
	rows, err := db.Query("SELECT COALESCE(first_seq, 0), seq FROM events WHERE thread_id = ? ORDER BY seq", thread)
	require.NoError(t, err)
	defer rows.Close()
	var stored []row
	for rows.Next() {
		var r row
		require.NoError(t, rows.Scan(&r.first, &r.last))
		stored = append(stored, r)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []row{{1, 7}, {0, 8}, {0, 9}, {0, 10}, {11, 17}, {0, 17 + sqlite.MaxEventRow}}, stored)
}

// Events of a commit whose numbers lie further apart than a row may span
// take rows of their own, however far apart.
func TestEventsFarApartTakeRowsOfTheirOwn(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "appserver.db"), true)
	const thread = "0190a5b2-0000-7000-8000-0000000000e2"
	var evs []*store.Event
	for _, batch := range [][]int64{{1, 2 + sqlite.MaxEventRow}, {3, math.MaxInt64 - 10}} {
		var b []*store.Event
		for _, seq := range batch {
			b = append(b, &store.Event{ThreadID: thread, Seq: seq, Method: "m",
				Data: []byte(`{"method":"m","params":{"n":` + strconv.FormatInt(seq, 10) + `}}`)})
		}
		require.NoError(t, s.Write(t.Context(), &store.Batch{AppendEvents: b}))
		evs = append(evs, b...)
	}
	got, err := s.ListEvents(t.Context(), thread, 0, 100)
	require.NoError(t, err)
	require.Len(t, got, 4)
	slices.SortFunc(evs, func(a, b *store.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	for i, e := range evs {
		require.Equal(t, e.Seq, got[i].Seq)
		require.Equal(t, string(e.Data), string(got[i].Data))
	}
}
