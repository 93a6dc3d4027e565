package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/appserver/appserver/internal/store/internal/backend"
)

// readDB gives the shared reads a pool: the read pool, or the writer's
// for the stores that read what they write. Its queries run as prepared
// statements, kept by SQL text (stmts): parsing them again for every
// read was about a tenth of the daemon's CPU in a plain turn, most of it
// the reads of a turn's end (BenchmarkTurns/store=embedded/threads=1,
// daemon profile, 2026-12-02).
type readDB struct {
	db    *sql.DB
	stmts *stmtCache
}

func (r readDB) Query(ctx context.Context, query string, args ...any) (backend.Rows, error) {
	var rows *sql.Rows
	var err error
	if st := r.stmts.lookup(ctx, query); st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = r.db.QueryContext(ctx, query, args...)
	}
	if err != nil {
		// A nil *sql.Rows would make a non-nil Rows.
		return nil, err
	}
	return rows, nil
}

func (r readDB) QueryRow(ctx context.Context, query string, args ...any) backend.Row {
	if st := r.stmts.lookup(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return r.db.QueryRowContext(ctx, query, args...)
}

func (readDB) NoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

func (readDB) StorageErr(err error) error { return storageErr(err) }
