-- Thread leases: which daemon may write a thread's turns when several share
-- one database (internal/cluster). A lease is held while the thread has a
-- running turn, renewed by its node's heartbeat, and free once expires_at
-- has passed. Every takeover draws a new token, and every write of a leased
-- turn checks its token in the same transaction, so a node that lost a
-- lease (paused, partitioned) writes nothing.

-- +goose Up
CREATE SEQUENCE thread_lease_tokens;

CREATE TABLE thread_leases (
    thread_id  uuid        PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
    node_id    text        NOT NULL,
    token      bigint      NOT NULL,
    -- the token this one replaced, so that a node taking a lease back can
    -- tell whether another node held it meanwhile (then its loaded copy of
    -- the thread is stale)
    prev_token bigint,
    expires_at timestamptz NOT NULL
);

-- the heartbeat renews the leases of one node
CREATE INDEX thread_leases_node_idx ON thread_leases (node_id);

-- +goose Down
DROP TABLE thread_leases;
DROP SEQUENCE thread_lease_tokens;
