-- The durable event log of each thread, and the HTTP API's idempotency keys.

-- +goose Up
-- One row per notification a thread's clients got, numbered per thread by
-- the daemon that ran the thread. No foreign key to threads: the log is
-- written apart from the transcript (and may outlive a thread by moments);
-- deleting a thread deletes its events.
CREATE TABLE events (
    thread_id  text        NOT NULL,
    seq        bigint      NOT NULL,
    method     text        NOT NULL,
    -- the notification frame exactly as sent, {"method","params","emittedAtMs"}
    data       bytea       NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (thread_id, seq)
);

-- retention prunes by age
CREATE INDEX events_created_idx ON events (created_at);

-- POST /v1/threads/{id}/turns with an Idempotency-Key: the first request
-- claims the key (turn_id empty) and records the turn it started.
CREATE TABLE idempotency_keys (
    scope      text        NOT NULL, -- principal and thread
    key        text        NOT NULL,
    hash       bytea       NOT NULL, -- of the request, canonically encoded
    turn_id    text        NOT NULL DEFAULT '',
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (scope, key)
);

CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at);

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE events;
