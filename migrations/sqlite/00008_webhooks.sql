-- Webhook subscriptions made over the HTTP API, and the delivery log of
-- every webhook (subscriptions and [[webhooks]] entries alike, by webhook
-- id), as on Postgres. Times are INTEGER microseconds since the Unix epoch
-- (UTC), as in 00001.

-- +goose Up
CREATE TABLE webhooks (
    id            TEXT    PRIMARY KEY,
    owner         TEXT    NOT NULL,  -- a principal's name, '' for the operator
    url           TEXT    NOT NULL,
    events        TEXT    NOT NULL,  -- event types joined by commas, '' for all
    thread_id     TEXT    NOT NULL,  -- '' for every thread the owner may see
    secret        TEXT    NOT NULL,  -- whsec_…: the daemon signs with it
    allow_private INTEGER NOT NULL,
    created_at    INTEGER NOT NULL
) STRICT;

CREATE INDEX webhooks_owner_idx ON webhooks (owner, created_at, id);

-- Each webhook keeps its newest attempts only: an append prunes the rest.
CREATE TABLE webhook_deliveries (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    webhook       TEXT    NOT NULL,
    event_id      TEXT    NOT NULL,
    event_type    TEXT    NOT NULL,
    attempted_at  INTEGER NOT NULL,
    status        INTEGER NOT NULL,  -- the receiver's HTTP status, 0 for none
    error         TEXT    NOT NULL,  -- '' for a success
    duration_us   INTEGER NOT NULL,
    next_retry_at INTEGER            -- NULL: not retried
) STRICT;

CREATE INDEX webhook_deliveries_webhook_idx ON webhook_deliveries (webhook, seq);

-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE webhooks;
