-- The audit log: an append-only record of approvals and their answers,
-- tool calls with their decision path, configuration writes, thread
-- deletions and the operator's actions, as on Postgres. Entries outlive
-- the threads they name (no foreign key); the daemon prunes them by age.
-- Times are INTEGER microseconds since the Unix epoch (UTC), as in 00001.

-- +goose Up
CREATE TABLE audit_log (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    at        INTEGER NOT NULL,
    kind      TEXT    NOT NULL,  -- approval, tool_call, config_write, thread_delete, admin, ...
    principal TEXT    NOT NULL,  -- a principal's name, '' for the operator
    client    TEXT    NOT NULL,  -- the connection's client name, '' when unknown
    node      TEXT    NOT NULL,  -- the daemon's node id
    trace_id  TEXT    NOT NULL,  -- the request's trace id, '' when none
    thread_id TEXT    NOT NULL,  -- '' when none
    turn_id   TEXT    NOT NULL,  -- '' when none
    detail    TEXT    NOT NULL   -- a JSON object
) STRICT;

CREATE INDEX audit_log_at_idx ON audit_log (at);
CREATE INDEX audit_log_principal_idx ON audit_log (principal, seq);
CREATE INDEX audit_log_thread_idx ON audit_log (thread_id, seq);

-- +goose Down
DROP TABLE audit_log;
