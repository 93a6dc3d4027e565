-- User messages queued on a thread (thread/queue/*), each waiting to
-- become one turn. The write that stores the turn marks its entry taken
-- (turn_id) in the same transaction, so that an entry becomes one turn or
-- stays queued, on whichever daemon of the database starts it; taken
-- entries stay, so that a retried add of the same client id still finds
-- its entry, until the thread is deleted.

-- +goose Up
CREATE TABLE queued_submissions (
    thread_id  uuid        NOT NULL REFERENCES threads (id),
    id         text        NOT NULL,
    client_id  text        NOT NULL,  -- clientUserMessageId: one entry per thread
    payload    text        NOT NULL,  -- opaque to the store: the input and its metadata
    ord        bigint      NOT NULL,  -- order within the thread, then created_at, id
    created_at timestamptz NOT NULL,
    turn_id    text,              -- the turn it became; NULL while queued
    PRIMARY KEY (thread_id, id),
    UNIQUE (thread_id, client_id)
);

-- +goose Down
DROP TABLE queued_submissions;
