-- The credentials the daemon gives browsers in exchange for a bearer token
-- (internal/auth): single-use tickets and session cookies. Kept here, not
-- in a daemon's memory, so that a ticket minted on one daemon opens a
-- connection on another behind the same load balancer, and is used once
-- across all of them (the DELETE … RETURNING that redeems it).

-- +goose Up
CREATE TABLE auth_credentials (
    digest     bytea       PRIMARY KEY, -- SHA-256 of the secret; the secret is never stored
    kind       text        NOT NULL,    -- ticket | session
    subject    text        NOT NULL,    -- a principal's name, '' for the operator
    origin     text        NOT NULL,    -- the Origin that asked for it, '' for none
    expires_at timestamptz NOT NULL
);

-- each new credential prunes the expired ones
CREATE INDEX auth_credentials_expires_idx ON auth_credentials (expires_at);

-- +goose Down
DROP TABLE auth_credentials;
