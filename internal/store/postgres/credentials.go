package postgres

import (
	"context"
	"time"

	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/store/internal/backend"
)

var credentialSQL = backend.NewCredentialSQL(backend.Postgres)

// PutCredential stores a browser credential and prunes the expired ones.
func (s *Store) PutCredential(ctx context.Context, c store.Credential, now time.Time) (err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpCredential, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return err
	}
	return backend.PutCredential(ctx, readDB{s.pool}, credentialSQL, backend.Postgres, c, now)
}

// GetCredential reads a browser credential.
func (s *Store) GetCredential(ctx context.Context, kind store.CredentialKind, digest []byte) (c store.Credential, found bool, err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpCredential, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return store.Credential{}, false, err
	}
	return backend.FindCredential(ctx, readDB{s.pool}, credentialSQL.Get, kind, digest)
}

// DeleteCredential deletes a browser credential and returns it: one
// DELETE … RETURNING, so that of concurrent deletes one finds the row.
func (s *Store) DeleteCredential(ctx context.Context, kind store.CredentialKind, digest []byte) (c store.Credential, found bool, err error) {
	defer func(start time.Time) { backend.Observe(s.cfg.Observe, store.OpCredential, start, err) }(time.Now())
	if err := s.usable(); err != nil {
		return store.Credential{}, false, err
	}
	return backend.FindCredential(ctx, readDB{s.pool}, credentialSQL.Delete, kind, digest)
}
