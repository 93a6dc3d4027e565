-- The credentials the daemon gives browsers in exchange for a bearer token
-- (internal/auth): single-use tickets and session cookies, as on Postgres.
-- Times are INTEGER microseconds since the Unix epoch (UTC), as in 00001.

-- +goose Up
CREATE TABLE auth_credentials (
    digest     BLOB    PRIMARY KEY, -- SHA-256 of the secret; the secret is never stored
    kind       TEXT    NOT NULL,    -- ticket | session
    subject    TEXT    NOT NULL,    -- a principal's name, '' for the operator
    origin     TEXT    NOT NULL,    -- the Origin that asked for it, '' for none
    expires_at INTEGER NOT NULL
) STRICT;

-- each new credential prunes the expired ones
CREATE INDEX auth_credentials_expires_idx ON auth_credentials (expires_at);

-- +goose Down
DROP TABLE auth_credentials;
