package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/sqlite"
	"github.com/appserver/appserver/internal/store/storetest"
)

// BenchmarkToolRound measures the store writes of one tool round of a turn,
// as internal/turns issues them: the tool's completed item, then the usage
// of the model response with the turn's history (thread meta and turn meta
// patches). Allocations per op are the point: they drive the daemon's GC.
func BenchmarkToolRound(b *testing.B) {
	b.Run("direct", func(b *testing.B) {
		s := openBench(b)
		benchToolRound(b, s)
	})
	b.Run("groupcommit", func(b *testing.B) {
		g := store.NewGroupCommitter(openBench(b), store.GroupCommitConfig{})
		b.Cleanup(func() { _ = g.Close() })
		benchToolRound(b, g)
	})
}

func openBench(b *testing.B) *sqlite.Store {
	b.Helper()
	s, err := sqlite.Open(b.Context(), sqlite.Config{Path: filepath.Join(b.TempDir(), "appserver.db"), Migrate: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func benchToolRound(b *testing.B, s store.Store) {
	ctx := context.Background()
	const threadID = "0190a5b2-0000-7000-8000-0000000000b1"
	const turnID = "turn-1"
	err := s.Write(ctx, &store.Batch{
		CreateThreads: []*store.Thread{{ID: threadID, Cwd: "/work", ModelProvider: "openai", Source: "vscode"}},
		CreateTurns:   []*store.Turn{{ThreadID: threadID, ID: turnID, Status: store.TurnInProgress}},
	})
	if err != nil {
		b.Fatal(err)
	}
	// A turn history of a dozen items of a few hundred bytes each, and a
	// thread meta with token usage, about the sizes a tool round carries.
	var hist []string
	for i := range 12 {
		hist = append(hist, fmt.Sprintf(`{"type":"function_call_output","call_id":"call_%02d","output":%q}`, i, strings.Repeat("output line\n", 25)))
	}
	turnMeta := json.RawMessage(`{"history":[` + strings.Join(hist, ",") + `]}`)
	threadMeta := json.RawMessage(`{"cliVersion":"0.1.0","tokenTotal":{"totalTokens":1234,"inputTokens":1000,"cachedInputTokens":500,"outputTokens":234,"reasoningOutputTokens":0},"lastUsage":{"totalTokens":123,"inputTokens":100,"cachedInputTokens":50,"outputTokens":23,"reasoningOutputTokens":0},"lastTurnId":"turn-1"}`)
	payload := json.RawMessage(`{"type":"dynamicToolCall","id":"call_x","tool":"lookup","arguments":{"q":"weather"},"status":"completed","contentItems":[{"type":"inputText","text":"` + strings.Repeat("sunny ", 40) + `"}],"success":true}`)

	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		item := &store.Item{ThreadID: threadID, TurnID: turnID, ItemID: fmt.Sprintf("call_%d", i), Type: "dynamicToolCall", Payload: payload}
		if err := s.Write(ctx, &store.Batch{AppendItems: []*store.Item{item}}); err != nil {
			b.Fatal(err)
		}
		err := s.Write(ctx, &store.Batch{
			UpdateThreads: []store.ThreadPatch{{ID: threadID, Meta: threadMeta}},
			UpdateTurns:   []store.TurnPatch{{ThreadID: threadID, ID: turnID, Meta: turnMeta}},
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearch measures thread/search's store query over a long history.
func BenchmarkSearch(b *testing.B) {
	s := openBench(b)
	// Measured once the store's indexer has caught up with the seeding.
	storetest.SearchBenchmark(b, s, func(ctx context.Context) error {
		_, err := s.IndexMessages(ctx)
		return err
	})
}

// BenchmarkIncrementalVacuumConversion measures the one-off VACUUM that
// Migrate runs on a database made before incremental auto-vacuum: one op
// converts a file holding 200 MiB of events (made anew, outside the
// timer, for each op). Reported as MB/s of file rewritten.
//
//	go test -run '^$' -bench IncrementalVacuumConversion -benchtime 3x ./internal/store/sqlite/
func BenchmarkIncrementalVacuumConversion(b *testing.B) {
	const size = 200 << 20
	data := []byte(`{"delta":"` + strings.Repeat("x", 32<<10) + `"}`)
	b.SetBytes(size)
	for b.Loop() {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "appserver.db")
		s, err := sqlite.Open(b.Context(), sqlite.Config{Path: path, Migrate: true})
		if err != nil {
			b.Fatal(err)
		}
		th := &store.Thread{ID: "0190a5b2-0000-7000-8000-000000000001", Cwd: "/", ModelProvider: "openai", Source: "cli"}
		if err := s.Write(b.Context(), &store.Batch{CreateThreads: []*store.Thread{th}}); err != nil {
			b.Fatal(err)
		}
		for seq := int64(1); seq <= size/int64(len(data)); seq += 100 {
			var evs []*store.Event
			for i := range int64(100) {
				evs = append(evs, &store.Event{ThreadID: th.ID, Seq: seq + i, Method: "m", Data: data})
			}
			if err := s.Write(b.Context(), &store.Batch{AppendEvents: evs}); err != nil {
				b.Fatal(err)
			}
		}
		_ = s.Close()
		db, err := sql.Open("sqlite", path)
		if err != nil {
			b.Fatal(err)
		}
		// Back to SQLite's default mode, as a file made before the change.
		if _, err := db.Exec("PRAGMA auto_vacuum = NONE"); err != nil {
			b.Fatal(err)
		}
		if _, err := db.Exec("VACUUM"); err != nil {
			b.Fatal(err)
		}
		_ = db.Close()
		b.StartTimer()
		s, err = sqlite.Open(b.Context(), sqlite.Config{Path: path, Migrate: true})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = s.Close()
		b.StartTimer()
	}
}

// BenchmarkPlainTurnWrites measures the store writes of a plain turn as
// the daemon issues them (two commits: the turn with its user message,
// then the answer with the turn's end and the thread's usage), without
// events and with the seven event rows a plain turn stores (about 3 KB of
// frames), which ride those commits. cpu-us/op is this process's CPU time
// per turn (the commits' fsync waits excluded): the difference between
// the two is what the event log costs the store.
func BenchmarkPlainTurnWrites(b *testing.B) {
	for _, events := range []int{0, 7} {
		b.Run(fmt.Sprintf("events=%d", events), func(b *testing.B) {
			storetest.BenchPlainTurns(b, openBench(b), events)
		})
	}
}

// BenchmarkPlainTurnPages counts the pages a plain turn's writes change
// (BenchmarkPlainTurnWrites' turns, after 300 of them): the frames it
// appends to the WAL (frames/op), each page written whole, and logs them
// by the table or index the page belongs to (SQLite's dbstat). A second
// connection holds a read transaction meanwhile, so that no checkpoint
// rewinds the WAL under the count.
func BenchmarkPlainTurnPages(b *testing.B) {
	for _, events := range []int{0, 7} {
		b.Run(fmt.Sprintf("events=%d", events), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "appserver.db")
			s, err := sqlite.Open(b.Context(), sqlite.Config{Path: path, Migrate: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			turn := storetest.PlainTurnWriter(b, s, events)
			for i := range 300 {
				turn(i)
			}
			db, err := sql.Open("sqlite", path)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
				b.Fatal(err)
			}
			reader, err := db.BeginTx(b.Context(), &sql.TxOptions{ReadOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			var n int
			if err := reader.QueryRow("SELECT count(*) FROM threads").Scan(&n); err != nil {
				b.Fatal(err)
			}
			for i := 300; b.Loop(); i++ {
				turn(i)
			}
			_ = reader.Rollback()
			byName, frames := walPages(b, db, path+"-wal")
			b.ReportMetric(float64(frames)/float64(b.N), "frames/op")
			b.Logf("frames by table or index over %d turns: %v", b.N, byName)
		})
	}
}

// walPages counts the frames of the WAL at path by the table or index
// (named as dbstat names them) their page belongs to; "" is a page of
// neither (the database header, the pointer maps).
func walPages(b *testing.B, db *sql.DB, path string) (map[string]int, int) {
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var pageSize int
	if err := db.QueryRow("PRAGMA page_size").Scan(&pageSize); err != nil {
		b.Fatal(err)
	}
	names := map[uint32]string{}
	rows, err := db.Query("SELECT name, pageno FROM dbstat")
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var name string
		var page uint32
		if err := rows.Scan(&name, &page); err != nil {
			b.Fatal(err)
		}
		names[page] = name
	}
	if err := rows.Close(); err != nil {
		b.Fatal(err)
	}
	const walHeader, frameHeader = 32, 24
	byName, frames := map[string]int{}, 0
	for off := walHeader; off+frameHeader+pageSize <= len(raw); off += frameHeader + pageSize {
		byName[names[binary.BigEndian.Uint32(raw[off:])]]++
		frames++
	}
	return byName, frames
}
