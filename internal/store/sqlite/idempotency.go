package sqlite

import (
	"context"
	"time"

	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

var idempotencySQL = backend.NewIdempotencySQL(backend.SQLite)

// Exec runs a statement: over the writer connection, readDB is the
// idempotency keys' writer.
func (db readDB) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	res, err := db.db.ExecContext(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// ClaimIdempotencyKey claims a key on the writer connection.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, scope, key string, hash []byte, now, expires time.Time) (claimed bool, turnID string, err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpIdempotencyKey, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return false, "", err
	}
	return backend.ClaimIdempotencyKey(ctx, s.writerPool(), idempotencySQL, backend.SQLite, scope, key, hash, now, expires)
}

// CompleteIdempotencyKey records the turn a claimed key started.
func (s *Store) CompleteIdempotencyKey(ctx context.Context, scope, key, turnID string) error {
	return s.execKey(ctx, idempotencySQL.Complete, turnID, scope, key)
}

// ReleaseIdempotencyKey forgets an unfinished claim.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, scope, key string) error {
	return s.execKey(ctx, idempotencySQL.Release, scope, key)
}

// PruneIdempotencyKeys deletes the expired keys.
func (s *Store) PruneIdempotencyKeys(ctx context.Context, now time.Time) (int64, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	n, err := s.writerPool().Exec(ctx, idempotencySQL.Prune, backend.SQLite.TimeArg(backend.Time(now)))
	if err != nil {
		return 0, storageErr(err)
	}
	return n, nil
}

func (s *Store) execKey(ctx context.Context, sql string, args ...any) (err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpIdempotencyKey, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return err
	}
	if _, err := (s.writerPool()).Exec(ctx, sql, args...); err != nil {
		return storageErr(err)
	}
	return nil
}
