-- In-process consumers of the event log (internal/eventlog's Consumer):
-- one row per consumer name, leased by one daemon at a time, and its
-- cursor, the last sequence number it handled in each thread. A consumer
-- of the same name on another daemon takes the lease over once it expired
-- (with a new token) and resumes from the cursor; a cursor is saved only
-- under the token of the lease.

-- +goose Up
CREATE TABLE event_consumers (
    name       text        PRIMARY KEY,
    holder     text        NOT NULL,
    token      bigint      NOT NULL,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE TABLE event_cursors (
    consumer  text   NOT NULL REFERENCES event_consumers (name) ON DELETE CASCADE,
    thread_id text   NOT NULL,
    seq       bigint NOT NULL,
    PRIMARY KEY (consumer, thread_id)
);

-- +goose Down
DROP TABLE event_cursors;
DROP TABLE event_consumers;
