package backend

import (
	"bytes"
	"context"
	"time"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// CredentialSQL are the statements of the browser credentials in one
// dialect.
type CredentialSQL struct {
	// Prune(now); Insert(digest, kind, subject, origin, expires) inserts
	// unless the digest exists; Get(digest, kind) and Delete(digest, kind)
	// return subject, origin, expires_at.
	Prune, Insert, Get, Delete string
}

// NewCredentialSQL returns the credential statements of dialect d.
func NewCredentialSQL(d Dialect) CredentialSQL {
	p := d.Param
	where := " WHERE digest = " + p(1) + " AND kind = " + p(2)
	return CredentialSQL{
		Prune: "DELETE FROM auth_credentials WHERE expires_at <= " + p(1),
		Insert: "INSERT INTO auth_credentials (digest, kind, subject, origin, expires_at) VALUES (" +
			p(1) + ", " + p(2) + ", " + p(3) + ", " + p(4) + ", " + p(5) + ") ON CONFLICT (digest) DO NOTHING",
		Get:    "SELECT subject, origin, expires_at FROM auth_credentials" + where,
		Delete: "DELETE FROM auth_credentials" + where + " RETURNING subject, origin, expires_at",
	}
}

// Credentials implements the browser credentials of store.Store
// (migration 00006) once for both SQL backends.
type Credentials struct {
	w, r    Execer
	d       Dialect
	q       CredentialSQL
	observe store.ObserveFunc
	usable  func() error
}

// NewCredentials returns the credentials of a store in dialect d: writes
// (and the delete that returns its row) go over w, reads over r (the same
// database; SQLite keeps a pool of readers apart); observe and usable are
// as NewReader's.
func NewCredentials(d Dialect, w, r Execer, observe store.ObserveFunc, usable func() error) Credentials {
	return Credentials{w: w, r: r, d: d, q: NewCredentialSQL(d), observe: observe, usable: usable}
}

// PutCredential implements store.Store.PutCredential: it stores a browser
// credential and prunes the expired ones, each statement committing on its
// own.
func (cs Credentials) PutCredential(ctx context.Context, c store.Credential, now time.Time) (err error) {
	defer func(start time.Time) { Observe(cs.observe, store.OpCredential, start, err) }(time.Now())
	if err := cs.usable(); err != nil {
		return err
	}
	return putCredential(ctx, cs.w, cs.q, cs.d, c, now)
}

// GetCredential implements store.Store.GetCredential.
func (cs Credentials) GetCredential(ctx context.Context, kind store.CredentialKind, digest []byte) (c store.Credential, found bool, err error) {
	defer func(start time.Time) { Observe(cs.observe, store.OpCredential, start, err) }(time.Now())
	if err := cs.usable(); err != nil {
		return store.Credential{}, false, err
	}
	return findCredential(ctx, cs.r, cs.q.Get, kind, digest)
}

// DeleteCredential implements store.Store.DeleteCredential: one DELETE …
// RETURNING, so that of concurrent deletes one finds the row.
func (cs Credentials) DeleteCredential(ctx context.Context, kind store.CredentialKind, digest []byte) (c store.Credential, found bool, err error) {
	defer func(start time.Time) { Observe(cs.observe, store.OpCredential, start, err) }(time.Now())
	if err := cs.usable(); err != nil {
		return store.Credential{}, false, err
	}
	return findCredential(ctx, cs.w, cs.q.Delete, kind, digest)
}

func putCredential(ctx context.Context, x Execer, q CredentialSQL, d Dialect, c store.Credential, now time.Time) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if _, err := x.Exec(ctx, q.Prune, d.TimeArg(Time(now))); err != nil {
		return x.StorageErr(err)
	}
	n, err := x.Exec(ctx, q.Insert, c.Digest, string(c.Kind), c.Subject, c.Origin, d.TimeArg(Time(c.Expires)))
	if err != nil {
		return x.StorageErr(err)
	}
	if n != 1 {
		return apperr.New(apperr.Conflict, "a credential with this digest is stored already")
	}
	return nil
}

// findCredential runs q.Get (or q.Delete, which returns the row it
// deleted) over x for the credential of that kind and digest.
func findCredential(ctx context.Context, x Execer, sql string, kind store.CredentialKind, digest []byte) (store.Credential, bool, error) {
	if err := store.ValidateCredentialKey(kind, digest); err != nil {
		return store.Credential{}, false, err
	}
	c := store.Credential{Digest: bytes.Clone(digest), Kind: kind}
	var expires timeCol
	err := x.QueryRow(ctx, sql, digest, string(kind)).Scan(&c.Subject, &c.Origin, &expires)
	if x.NoRows(err) {
		return store.Credential{}, false, nil
	}
	if err != nil {
		return store.Credential{}, false, x.StorageErr(err)
	}
	c.Expires = expires.t
	return c, true, nil
}
