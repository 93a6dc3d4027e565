-- In-process consumers of the event log (internal/eventlog's Consumer):
-- one row per consumer name, leased by one holder at a time, and its
-- cursor, the last sequence number it handled in each thread. Times are
-- INTEGER microseconds since the Unix epoch (UTC), as in 00001.

-- +goose Up
CREATE TABLE event_consumers (
    name       TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    token      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE event_cursors (
    consumer  TEXT    NOT NULL REFERENCES event_consumers (name) ON DELETE CASCADE,
    thread_id TEXT    NOT NULL,
    seq       INTEGER NOT NULL,
    PRIMARY KEY (consumer, thread_id)
) STRICT;

-- +goose Down
DROP TABLE event_cursors;
DROP TABLE event_consumers;
