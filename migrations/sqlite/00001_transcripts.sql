-- Transcripts: threads, their turns, and the items of those turns.
-- Times are INTEGER microseconds since the Unix epoch (UTC), the precision
-- Postgres keeps, so both backends sort and round-trip alike.

-- +goose Up
CREATE TABLE threads (
    id             TEXT    NOT NULL PRIMARY KEY, -- canonical lower-case UUID
    name           TEXT,
    -- lower-cased copies made by the application, so that search ignores
    -- case beyond ASCII, as on Postgres
    name_fold      TEXT    NOT NULL DEFAULT '',
    preview        TEXT    NOT NULL DEFAULT '',
    preview_fold   TEXT    NOT NULL DEFAULT '',
    cwd            TEXT    NOT NULL,
    model_provider TEXT    NOT NULL,
    model          TEXT,
    source         TEXT    NOT NULL,
    forked_from_id TEXT,
    archived       INTEGER NOT NULL DEFAULT 0,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    recency_at     INTEGER NOT NULL,
    meta           TEXT,
    -- last Seq handed out to a turn / an item of this thread
    turn_seq       INTEGER NOT NULL DEFAULT 0,
    item_seq       INTEGER NOT NULL DEFAULT 0
) STRICT;

-- thread/list: the archived filter, then keyset order on (sort key, id)
CREATE INDEX threads_list_created_idx ON threads (archived, created_at, id);
CREATE INDEX threads_list_updated_idx ON threads (archived, updated_at, id);
CREATE INDEX threads_list_recency_idx ON threads (archived, recency_at, id);

CREATE TABLE turns (
    thread_id    TEXT    NOT NULL REFERENCES threads (id),
    id           TEXT    NOT NULL,
    seq          INTEGER NOT NULL,
    status       TEXT    NOT NULL
                 CHECK (status IN ('inProgress', 'completed', 'interrupted', 'failed')),
    error        TEXT,
    started_at   INTEGER,
    completed_at INTEGER,
    meta         TEXT,
    PRIMARY KEY (thread_id, id),
    UNIQUE (thread_id, seq)
) STRICT;

-- start-up looks for the turns a crashed daemon left running
CREATE INDEX turns_in_progress_idx ON turns (thread_id, seq) WHERE status = 'inProgress';

CREATE TABLE items (
    thread_id  TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    turn_id    TEXT    NOT NULL,
    item_id    TEXT    NOT NULL,
    type       TEXT    NOT NULL,
    payload    TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (thread_id, seq),
    UNIQUE (thread_id, item_id),
    FOREIGN KEY (thread_id, turn_id) REFERENCES turns (thread_id, id)
) STRICT;

-- thread/items/list restricted to one turn (and the foreign key's checks)
CREATE INDEX items_turn_idx ON items (thread_id, turn_id, seq);

-- +goose Down
DROP TABLE items;
DROP TABLE turns;
DROP TABLE threads;
