-- User messages queued on a thread (thread/queue/*), each waiting to
-- become one turn. The write that stores the turn marks its entry taken
-- (turn_id) in the same transaction, so that an entry becomes one turn or
-- stays queued; taken entries stay, so that a retried add of the same
-- client id still finds its entry, until the thread is deleted.
-- Times are INTEGER microseconds since the Unix epoch (UTC), as in 00001.

-- +goose Up
CREATE TABLE queued_submissions (
    thread_id  TEXT    NOT NULL REFERENCES threads (id),
    id         TEXT    NOT NULL,
    client_id  TEXT    NOT NULL,  -- clientUserMessageId: one entry per thread
    payload    TEXT    NOT NULL,  -- opaque to the store: the input and its metadata
    ord        INTEGER NOT NULL,  -- order within the thread, then created_at, id
    created_at INTEGER NOT NULL,
    turn_id    TEXT,              -- the turn it became; NULL while queued
    PRIMARY KEY (thread_id, id),
    UNIQUE (thread_id, client_id)
) STRICT;

-- +goose Down
DROP TABLE queued_submissions;
