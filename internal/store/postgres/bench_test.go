package postgres_test

import (
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
	storetest.SearchBenchmark(b, s)
}
