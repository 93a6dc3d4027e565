package postgres_test

import (
	"database/sql"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/store/pgtest"
	"github.com/appserver/appserver/internal/store/storetest"
)

// A database at migration 00011 (before events shared rows and before the
// numbering reservations), holding a thread's events one per row,
// upgrades with the events readable one by one, a reservation starting
// past them and new events appending after them.
func TestUpgradeFromMigration11(t *testing.T) {
	url := pgtest.URL(t)
	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	defer db.Close()
	_, err = storetest.Migrations(t, db, "postgres").UpTo(t.Context(), 11)
	require.NoError(t, err)

	const thread = "0190a5b2-0000-7000-8000-0000000000d2"
	at := storetest.OldEventTime(0)
	_, err = db.Exec(`INSERT INTO threads (id, cwd, model_provider, source, created_at, updated_at, recency_at) VALUES ($1, '/', 'openai', 'cli', $2, $2, $2)`, thread, at)
	require.NoError(t, err)
	for seq := 1; seq <= 5; seq++ {
		_, err = db.Exec(`INSERT INTO events (thread_id, seq, method, data, created_at) VALUES ($1, $2, 'item/completed', $3, $4)`,
			thread, seq, []byte(storetest.OldEventFrame(seq)), storetest.OldEventTime(seq))
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	storetest.UpgradedEvents(t, open(t, url, true), thread)
}
