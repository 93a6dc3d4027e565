package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
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
	storetest.SearchBenchmark(b, openBench(b))
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
