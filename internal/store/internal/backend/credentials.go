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

// PutCredential implements store.Store.PutCredential with the statements
// q of dialect d over x; each statement commits on its own.
func PutCredential(ctx context.Context, x Execer, q CredentialSQL, d Dialect, c store.Credential, now time.Time) error {
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

// FindCredential runs q.Get (or q.Delete, which returns the row it
// deleted) over x for the credential of that kind and digest.
func FindCredential(ctx context.Context, x Execer, sql string, kind store.CredentialKind, digest []byte) (store.Credential, bool, error) {
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
