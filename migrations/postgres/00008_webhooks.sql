-- Webhook subscriptions made over the HTTP API, and the delivery log of
-- every webhook (subscriptions and [[webhooks]] entries alike, by webhook
-- id). Kept here so that every daemon of the database delivers them (one
-- at a time, under the event consumer's lease) and shows the same log.

-- +goose Up
CREATE TABLE webhooks (
    id            text        PRIMARY KEY,
    owner         text        NOT NULL,  -- a principal's name, '' for the operator
    url           text        NOT NULL,
    events        text        NOT NULL,  -- event types joined by commas, '' for all
    thread_id     text        NOT NULL,  -- '' for every thread the owner may see
    secret        text        NOT NULL,  -- whsec_…: the daemon signs with it
    allow_private boolean     NOT NULL,
    created_at    timestamptz NOT NULL
);

CREATE INDEX webhooks_owner_idx ON webhooks (owner, created_at, id);

-- Each webhook keeps its newest attempts only: an append prunes the rest.
CREATE TABLE webhook_deliveries (
    seq           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook       text        NOT NULL,
    event_id      text        NOT NULL,
    event_type    text        NOT NULL,
    attempted_at  timestamptz NOT NULL,
    status        integer     NOT NULL,  -- the receiver's HTTP status, 0 for none
    error         text        NOT NULL,  -- '' for a success
    duration_us   bigint      NOT NULL,
    next_retry_at timestamptz            -- NULL: not retried
);

CREATE INDEX webhook_deliveries_webhook_idx ON webhook_deliveries (webhook, seq);

-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE webhooks;
