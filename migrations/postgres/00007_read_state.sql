-- Each thread's read state as clients mark it (thread/readState/update):
-- JSON {"mark": "read"|"unread", "throughSeq": N}, NULL while never
-- marked. The turns layer derives the first unread position from it and
-- the thread's turns.

-- +goose Up
ALTER TABLE threads ADD COLUMN read_state jsonb;

-- +goose Down
ALTER TABLE threads DROP COLUMN read_state;
