-- What each principal spent of its period budget: one row per principal
-- and period, added to atomically after each model response, so that the
-- daemons sharing the database share the budget.

-- +goose Up
CREATE TABLE budget_spend (
    principal    text        NOT NULL,  -- a principal's name, '' for the operator
    period_start timestamptz NOT NULL,
    tokens       bigint      NOT NULL,
    cost_micros  bigint      NOT NULL,  -- millionths of the prices' currency
    PRIMARY KEY (principal, period_start)
);

-- +goose Down
DROP TABLE budget_spend;
