package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/appserver/appserver/internal/store/internal/backend"
)

// readDB gives the shared reads the read pool.
type readDB struct{ db *sql.DB }

func (r readDB) Query(ctx context.Context, query string, args ...any) (backend.Rows, error) {
	rows, err := r.db.QueryContext(ctx, query, args...)
	if err != nil {
		// A nil *sql.Rows would make a non-nil Rows.
		return nil, err
	}
	return rows, nil
}

func (r readDB) QueryRow(ctx context.Context, query string, args ...any) backend.Row {
	return r.db.QueryRowContext(ctx, query, args...)
}

func (readDB) NoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

func (readDB) StorageErr(err error) error { return storageErr(err) }
