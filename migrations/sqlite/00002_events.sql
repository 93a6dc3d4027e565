-- The durable event log of each thread, and the HTTP API's idempotency keys.
-- Times are INTEGER microseconds since the Unix epoch (UTC), as in 00001.

-- +goose Up
-- One row per notification a thread's clients got, numbered per thread by
-- the daemon that ran the thread. No foreign key to threads: the log is
-- written apart from the transcript; deleting a thread deletes its events.
CREATE TABLE events (
    thread_id  TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    method     TEXT    NOT NULL,
    -- the notification frame exactly as sent, {"method","params","emittedAtMs"}
    data       BLOB    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (thread_id, seq)
) STRICT;

-- retention prunes by age
CREATE INDEX events_created_idx ON events (created_at);

-- POST /v1/threads/{id}/turns with an Idempotency-Key: the first request
-- claims the key (turn_id empty) and records the turn it started.
CREATE TABLE idempotency_keys (
    scope      TEXT    NOT NULL, -- principal and thread
    key        TEXT    NOT NULL,
    hash       BLOB    NOT NULL, -- of the request, canonically encoded
    turn_id    TEXT    NOT NULL DEFAULT '',
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (scope, key)
) STRICT;

CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at);

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE events;
