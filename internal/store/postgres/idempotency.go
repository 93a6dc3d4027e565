package postgres

import (
	"context"
	"time"

	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

var idempotencySQL = backend.NewIdempotencySQL(backend.Postgres)

// Exec runs a statement on the pool: readDB is also the idempotency keys'
// writer, whose statements each commit alone.
func (db readDB) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := db.pool.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

// ClaimIdempotencyKey claims a key for the daemons sharing the database.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, scope, key string, hash []byte, now, expires time.Time) (claimed bool, turnID string, err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpIdempotencyKey, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return false, "", err
	}
	return backend.ClaimIdempotencyKey(ctx, readDB{s.pool}, idempotencySQL, backend.Postgres, scope, key, hash, now, expires)
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
	n, err := readDB{s.pool}.Exec(ctx, idempotencySQL.Prune, now)
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
	if _, err := (readDB{s.pool}).Exec(ctx, sql, args...); err != nil {
		return storageErr(err)
	}
	return nil
}
