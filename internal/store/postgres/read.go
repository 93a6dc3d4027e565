package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/appserver/appserver/internal/store/internal/backend"
)

// readDB gives the shared reads the pool.
type readDB struct{ pool *pgxpool.Pool }

func (db readDB) Query(ctx context.Context, sql string, args ...any) (backend.Rows, error) {
	rows, err := db.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgRows{rows}, nil
}

func (db readDB) QueryRow(ctx context.Context, sql string, args ...any) backend.Row {
	return db.pool.QueryRow(ctx, sql, args...)
}

func (readDB) NoRows(err error) bool { return isNoRows(err) }

func (readDB) StorageErr(err error) error { return storageErr(err) }

// pgRows is pgx.Rows with the Close of database/sql.
type pgRows struct{ pgx.Rows }

func (r pgRows) Close() error {
	r.Rows.Close()
	return nil
}
