-- Thread leases and forwarded requests (internal/cluster): which daemon
-- may write a thread's turns when several share one database. A lease is
-- held while the thread has a running turn, renewed by its node's
-- heartbeat, and free once expires_at has passed. Every takeover draws a
-- new token, and every write of a leased turn checks its token in the
-- same transaction, so a node that lost a lease (paused, partitioned)
-- writes nothing.

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

-- Requests one node forwards to the node that runs a thread's turn (turn
-- steer, interrupt and start, answers to server requests). The sender
-- inserts a row and notifies the owner's channel (appserver_cmd_<node>)
-- with "c:<id>"; the owner claims it (state running), runs it, stores the
-- outcome (state done) and notifies the sender's channel with "r:<id>";
-- the sender reads the outcome and deletes the row.
CREATE TABLE node_commands (
    id            bigserial   PRIMARY KEY,
    node_id       text        NOT NULL,
    reply_to      text        NOT NULL,
    method        text        NOT NULL,
    params        jsonb       NOT NULL,
    state         text        NOT NULL DEFAULT 'pending'
                  CHECK (state IN ('pending', 'running', 'done')),
    result        jsonb,
    error_code    text,
    error_message text,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- a node looks for the requests it missed while its listener reconnected
CREATE INDEX node_commands_pending_idx ON node_commands (node_id) WHERE state = 'pending';

-- +goose Down
DROP TABLE node_commands;
DROP TABLE thread_leases;
DROP SEQUENCE thread_lease_tokens;
