package postgres_test

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/pgtest"
	"github.com/appserver/appserver/internal/store/postgres"
	"github.com/appserver/appserver/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		pgtest.Stop()
		os.Exit(code)
	}))
}

func open(t *testing.T, url string, migrate bool) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), postgres.Config{URL: url, MaxConns: 4, Migrate: migrate})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, pgtest.URL(t), true) })
}

func TestMigrateFromEmpty(t *testing.T) {
	url := pgtest.URL(t)
	_, err := postgres.Open(t.Context(), postgres.Config{URL: url})
	require.ErrorContains(t, err, "the database has no appserver schema: run `appserver migrate` or start with --migrate")
	s := open(t, url, true)
	require.NoError(t, s.Migrate(t.Context()), "migrating twice is a no-op")
	s = open(t, url, false)
	turns, err := s.ListInProgressTurns(t.Context())
	require.NoError(t, err)
	require.Empty(t, turns)
}

func TestOpenUnavailable(t *testing.T) {
	_, err := postgres.Open(t.Context(), postgres.Config{URL: "postgres://nobody@/nodb?host=/nonexistent&connect_timeout=1"})
	require.Equal(t, apperr.Unavailable, apperr.CodeOf(err), "error: %v", err)
	_, err = postgres.Open(t.Context(), postgres.Config{URL: "postgres://%zz"})
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err), "error: %v", err)
}

func TestConfigHooks(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	var mu sync.Mutex
	seen := map[string][]apperr.Code{}
	s, err := postgres.Open(t.Context(), postgres.Config{
		URL:     pgtest.URL(t),
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
