-- A row of several events of a thread may skip numbers.
-- The embedded store does not keep deltas (a message's text, a command's
-- output, piece by piece); their numbers fell between the events of a
-- commit and split them into several rows. A row of several events (00012)
-- may now skip numbers: where they fall, a line of '0' bytes one shorter
-- than their count (an empty line for one) stands among the frames, which
-- start with '{' (internal/store/internal/backend/eventrows.go). No column
-- changes; the version tells a daemon that reads such rows from one that
-- does not.

-- +goose Up
SELECT 1;

-- +goose Down
-- A daemon before this migration would read such a line as a frame: the
-- rows that hold one go.
DELETE FROM events WHERE first_seq IS NOT NULL AND (
    CAST(data AS TEXT) GLOB ('*' || char(10) || char(10) || '*') OR
    CAST(data AS TEXT) GLOB ('*' || char(10) || '0*'));
