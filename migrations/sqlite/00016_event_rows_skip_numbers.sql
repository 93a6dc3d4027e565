-- A row of several events of a thread may skip numbers.
-- The embedded store does not keep deltas (a message's text, a command's
-- output, piece by piece); their numbers fell between the events of a
-- commit and split them into several rows. A row of several events (00012)
-- may now skip numbers: where they fall, a line of '0' bytes one shorter
-- than their count (an empty line for one) stands among the frames, which
-- start with '{' (internal/store/internal/backend/eventrows.go). No column
-- changes. A daemon older than this migration cannot read such rows (it
-- reports an internal error for them); going down deletes them.

-- +goose Up
SELECT 1;

-- +goose Down
DELETE FROM events WHERE first_seq IS NOT NULL AND (instr(data, x'0a0a') > 0 OR instr(data, x'0a30') > 0);
