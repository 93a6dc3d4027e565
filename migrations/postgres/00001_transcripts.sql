-- Transcripts: threads, their turns, and the items of those turns.

-- +goose Up
CREATE TABLE threads (
    id             uuid        PRIMARY KEY,
    name           text,
    -- lower-cased copies made by the application, so that search ignores
    -- case the same way on every backend and under every collation
    name_fold      text        NOT NULL DEFAULT '',
    preview        text        NOT NULL DEFAULT '',
    preview_fold   text        NOT NULL DEFAULT '',
    cwd            text        NOT NULL,
    model_provider text        NOT NULL,
    model          text,
    source         text        NOT NULL,
    forked_from_id uuid,
    archived       boolean     NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    recency_at     timestamptz NOT NULL,
    meta           jsonb,
    -- last Seq handed out to a turn / an item of this thread; bumped with
    -- UPDATE ... RETURNING in the writing transaction, so that sequences
    -- stay gap-free under concurrency and after rollbacks
    turn_seq       bigint      NOT NULL DEFAULT 0,
    item_seq       bigint      NOT NULL DEFAULT 0
);

-- thread/list: the archived filter, then keyset order on (sort key, id)
CREATE INDEX threads_list_created_idx ON threads (archived, created_at, id);
CREATE INDEX threads_list_updated_idx ON threads (archived, updated_at, id);
CREATE INDEX threads_list_recency_idx ON threads (archived, recency_at, id);

CREATE TABLE turns (
    thread_id    uuid        NOT NULL REFERENCES threads (id),
    id           text        NOT NULL,
    seq          bigint      NOT NULL,
    status       text        NOT NULL
                 CHECK (status IN ('inProgress', 'completed', 'interrupted', 'failed')),
    error        jsonb,
    started_at   timestamptz,
    completed_at timestamptz,
    meta         jsonb,
    PRIMARY KEY (thread_id, id),
    UNIQUE (thread_id, seq)
);

-- start-up looks for the turns a crashed daemon left running
CREATE INDEX turns_in_progress_idx ON turns (thread_id, seq) WHERE status = 'inProgress';

CREATE TABLE items (
    thread_id  uuid        NOT NULL,
    seq        bigint      NOT NULL,
    turn_id    text        NOT NULL,
    item_id    text        NOT NULL,
    type       text        NOT NULL,
    payload    jsonb       NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (thread_id, seq),
    UNIQUE (thread_id, item_id),
    FOREIGN KEY (thread_id, turn_id) REFERENCES turns (thread_id, id)
);

-- thread/items/list restricted to one turn (and the foreign key's checks)
CREATE INDEX items_turn_idx ON items (thread_id, turn_id, seq);

-- +goose Down
DROP TABLE items;
DROP TABLE turns;
DROP TABLE threads;
