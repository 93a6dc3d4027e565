package postgres_test

import (
	"fmt"
	"testing"

	"github.com/appserver/appserver/internal/store/pgtest"
	"github.com/appserver/appserver/internal/store/postgres"
	"github.com/appserver/appserver/internal/store/storetest"
)

// BenchmarkSearch measures thread/search's store query over a long history.
func BenchmarkSearch(b *testing.B) {
	s, err := postgres.Open(b.Context(), postgres.Config{URL: pgtest.URL(b), MaxConns: 4, Migrate: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	storetest.SearchBenchmark(b, s, nil)
}

// BenchmarkPlainTurnWrites writes plain turns as the daemon does, two
// commits a turn (storetest.PlainTurnWriter): ns/op is a turn's time in
// the store, cpu-us/op the client's CPU (Postgres's own is not counted).
func BenchmarkPlainTurnWrites(b *testing.B) {
	for _, events := range []int{0, 7} {
		b.Run(fmt.Sprintf("events=%d", events), func(b *testing.B) {
			s, err := postgres.Open(b.Context(), postgres.Config{URL: pgtest.URL(b), MaxConns: 4, Migrate: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			storetest.BenchPlainTurns(b, s, events)
		})
	}
}
