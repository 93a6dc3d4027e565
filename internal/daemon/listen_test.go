package daemon

import (
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/pgnotify"
	"github.com/appserver/appserver/internal/store/pgtest"
)

// TestOneListenConnectionPerDaemon: on Postgres the daemon's core holds
// one LISTEN connection, the notifier, which serves both the event log's
// fan-out and the cluster node's forwarded requests; it closes with the
// core.
func TestOneListenConnectionPerDaemon(t *testing.T) {
	url := pgtest.URL(t)
	cfg := config.Default()
	cfg.DatabaseURL = url
	cfg.DataDir = t.TempDir()
	cfg.NodeID = "node-1"
	migrate := true
	cfg.Migrate = &migrate
	var stops Stops
	defer stops.Run()
	core, err := NewCore(t.Context(), &cfg, Doors{}, "", "test", slog.New(slog.DiscardHandler), &stops)
	require.NoError(t, err)
	require.NotNil(t, core.Node)

	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	defer pool.Close()
	listeners := func() (all, notifier int) {
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE query LIKE 'LISTEN %'),
			count(*) FILTER (WHERE application_name = $1)
			FROM pg_stat_activity WHERE datname = current_database()`, pgnotify.ApplicationName).Scan(&all, &notifier))
		return all, notifier
	}
	require.Eventually(t, func() bool { _, n := listeners(); return n == 1 }, 10*time.Second, 10*time.Millisecond)
	// Whatever else might have started listens by now.
	time.Sleep(200 * time.Millisecond)
	all, notifier := listeners()
	require.Equal(t, 1, notifier, "one notifier connection")
	require.Equal(t, 1, all, "no other connection LISTENs")

	stops.Run()
	require.Eventually(t, func() bool { all, n := listeners(); return all == 0 && n == 0 }, 10*time.Second, 10*time.Millisecond,
		"the connection closes with the daemon")
}
