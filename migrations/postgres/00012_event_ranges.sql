-- Several events of a thread in one row of the event log.

-- +goose Up
-- NULL: the row holds one event, numbered seq. Set: the row holds the
-- thread's events first_seq to seq (as the embedded store writes them; see
-- its migration 00012). The daemons on Postgres write one row per event and
-- leave it NULL; the column is here so that both backends read the table
-- with the same queries.
ALTER TABLE events ADD COLUMN first_seq bigint;

-- +goose Down
ALTER TABLE events DROP COLUMN first_seq;
