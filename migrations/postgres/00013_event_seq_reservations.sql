-- The sequence numbers a daemon may hand out in a thread's event log.

-- +goose Up
-- reserved is the greatest number reserved for the thread's log. A daemon
-- numbers a thread's notifications, and sends them to its clients, only
-- within a block it reserved here, before those notifications are stored:
-- a daemon that starts numbering the thread (after a crash, a restart or a
-- hand-over) begins past every number handed out, stored or not.
CREATE TABLE event_seq_reservations (
    thread_id text   NOT NULL PRIMARY KEY,
    reserved  bigint NOT NULL
);

-- +goose Down
DROP TABLE event_seq_reservations;
