package sqlite_test

import (
	"path/filepath"
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
