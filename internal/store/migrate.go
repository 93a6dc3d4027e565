package store

import (
	"context"
	"database/sql"
	"io/fs"
	"runtime"
	"runtime/debug"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/migrations"
)

// The dialects Migrate knows; each names a directory of migrations.FS.
const (
	DialectPostgres = "postgres"
	DialectSQLite   = "sqlite"
)

// Migrate applies the pending migrations of dialect to db. It is idempotent
// and uses a goose Provider, so no global goose state is touched. On Postgres
// it holds an advisory lock, so that daemons starting together migrate once.
func Migrate(ctx context.Context, db *sql.DB, dialect string) error {
	var (
		gd   goose.Dialect
		opts = []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	)
	switch dialect {
	case DialectPostgres:
		gd = goose.DialectPostgres
		// Poll for the lock every second for up to five minutes.
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
		if err != nil {
			return apperr.Wrap(apperr.Internal, err, "migrate: lock")
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	case DialectSQLite:
		gd = goose.DialectSQLite3
	default:
		return apperr.New(apperr.Invalid, "migrate: unknown dialect %q", dialect)
	}
	fsys, err := fs.Sub(migrations.FS, dialect)
	if err != nil {
		return apperr.Wrap(apperr.Internal, err, "migrate: migrations")
	}
	p, err := goose.NewProvider(gd, db, fsys, opts...)
	if err != nil {
		return apperr.Wrap(apperr.Internal, err, "migrate: migrations")
	}
	_, err = p.Up(ctx)
	releaseParserBuffers()
	if err != nil {
		return apperr.Wrap(apperr.Internal, err, "migrate: applying migrations failed")
	}
	return nil
}

// releaseParserBuffers frees the ~16 MB of buffers goose's SQL parser
// leaves in a sync.Pool. Pooled memory is only dropped after two GC cycles,
// and a daemon that just started rarely runs any, so without this every
// daemon that migrated at start-up kept them as resident memory.
func releaseParserBuffers() {
	runtime.GC()
	debug.FreeOSMemory() // the second cycle, returning the pages to the OS
}
