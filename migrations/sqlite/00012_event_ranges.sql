-- Several events of a thread in one row of the event log.
-- Times are INTEGER microseconds since the Unix epoch (UTC), as in 00001.

-- +goose Up
-- NULL: the row holds one event, numbered seq (every row made before this
-- migration). Set: the row holds the thread's events first_seq to seq, each
-- number present, that one commit stored together; data is their frames
-- joined by a newline byte (a frame is compact JSON and holds none), method
-- is the first event's method and created_at the newest event's time. The
-- embedded store writes such rows to spend one row, not one per event, on
-- each commit.
ALTER TABLE events ADD COLUMN first_seq INTEGER;

-- +goose Down
-- A row of several events would read as one event: those events go.
DELETE FROM events WHERE first_seq IS NOT NULL;
ALTER TABLE events DROP COLUMN first_seq;
