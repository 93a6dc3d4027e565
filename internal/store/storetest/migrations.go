package storetest

import (
	"database/sql"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/migrations"
)

// Migrations returns the migrations of a backend ("sqlite" or "postgres")
// over db, for tests that make a database of an older schema or go down
// and up again.
func Migrations(t testing.TB, db *sql.DB, backend string) *goose.Provider {
	t.Helper()
	dialect := goose.DialectSQLite3
	if backend == "postgres" {
		dialect = goose.DialectPostgres
	}
	fsys, err := fs.Sub(migrations.FS, backend)
	require.NoError(t, err)
	p, err := goose.NewProvider(dialect, db, fsys, goose.WithDisableGlobalRegistry(true))
	require.NoError(t, err)
	return p
}

// OldEventFrame is the frame of event seq that a test writes, one event a
// row, into a database of a schema before 00012 (UpgradedEvents).
func OldEventFrame(seq int) string {
	return fmt.Sprintf(`{"method":"item/completed","params":{"n":%d},"emittedAtMs":1}`, seq)
}

// OldEventTime is when event seq of such a database was made.
func OldEventTime(seq int) time.Time {
	return time.Date(2026, 11, 20, 10, 0, seq, 0, time.UTC)
}

// UpgradedEvents checks a store migrated from a database that held
// events 1 to 5 of thread one per row (OldEventFrame, OldEventTime): they
// read back one by one, numbers are reserved past them, new events (several
// in a row) read back after them, and an event over an old row is
// refused.
func UpgradedEvents(t *testing.T, s store.Store, thread string) {
	t.Helper()
	ctx := t.Context()
	evs, err := s.ListEvents(ctx, thread, 0, 100)
	require.NoError(t, err)
	require.Len(t, evs, 5)
	for i, ev := range evs {
		require.EqualValues(t, i+1, ev.Seq)
		require.Equal(t, "item/completed", ev.Method)
		require.Equal(t, OldEventFrame(i+1), string(ev.Data))
		require.True(t, ev.CreatedAt.Equal(OldEventTime(i+1)), "event %d at %v", i+1, ev.CreatedAt)
	}
	last, err := s.LastEventSeq(ctx, thread)
	require.NoError(t, err)
	require.EqualValues(t, 5, last)
	first, err := s.ReserveEventSeqs(ctx, thread, 10)
	require.NoError(t, err)
	require.EqualValues(t, 6, first, "reserved past the stored numbers")
	var next []*store.Event
	for seq := 6; seq <= 8; seq++ {
		next = append(next, &store.Event{ThreadID: thread, Seq: int64(seq), Method: "item/completed", Data: []byte(OldEventFrame(seq)), CreatedAt: time.Now()})
	}
	require.NoError(t, s.Write(ctx, &store.Batch{AppendEvents: next}))
	evs, err = s.ListEvents(ctx, thread, 4, 100)
	require.NoError(t, err)
	require.Len(t, evs, 4)
	for i, ev := range evs {
		require.EqualValues(t, i+5, ev.Seq)
		require.Equal(t, OldEventFrame(i+5), string(ev.Data))
	}
	err = s.Write(ctx, &store.Batch{AppendEvents: []*store.Event{{ThreadID: thread, Seq: 3, Method: "m", Data: []byte("{}"), CreatedAt: time.Now()}}})
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err), "an event over an old row is refused: %v", err)
}
