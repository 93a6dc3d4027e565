-- The audit log: an append-only record of approvals and their answers,
-- tool calls with their decision path, configuration writes, thread
-- deletions and the operator's actions. Entries outlive the threads they
-- name (no foreign key); the daemons prune them by age.

-- +goose Up
CREATE TABLE audit_log (
    seq       bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        timestamptz NOT NULL,
    kind      text        NOT NULL,  -- approval, tool_call, config_write, thread_delete, admin, ...
    principal text        NOT NULL,  -- a principal's name, '' for the operator
    client    text        NOT NULL,  -- the connection's client name, '' when unknown
    node      text        NOT NULL,  -- the daemon's node id
    trace_id  text        NOT NULL,  -- the request's trace id, '' when none
    thread_id text        NOT NULL,  -- '' when none
    turn_id   text        NOT NULL,  -- '' when none
    detail    jsonb       NOT NULL
);

CREATE INDEX audit_log_at_idx ON audit_log (at);
CREATE INDEX audit_log_principal_idx ON audit_log (principal, seq);
CREATE INDEX audit_log_thread_idx ON audit_log (thread_id, seq);

-- +goose Down
DROP TABLE audit_log;
