-- What each principal spent of its period budget: one row per principal
-- and period, added to atomically after each model response. Times are
-- INTEGER microseconds since the Unix epoch (UTC), as in 00001.

-- +goose Up
CREATE TABLE budget_spend (
    principal    TEXT    NOT NULL,  -- a principal's name, '' for the operator
    period_start INTEGER NOT NULL,
    tokens       INTEGER NOT NULL,
    cost_micros  INTEGER NOT NULL,  -- millionths of the prices' currency
    PRIMARY KEY (principal, period_start)
) STRICT;

-- +goose Down
DROP TABLE budget_spend;
