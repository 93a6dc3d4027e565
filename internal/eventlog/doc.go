// Package eventlog is the durable event log of threads: it numbers every
// notification the hub sends for a thread (hub.Journal), queues it for the
// store's events table (a store.EventQueue that the group committer drains
// into every commit round, so events ride the transcript's transactions;
// what no round takes within FlushDelay the Log writes itself, through the
// same committer), prunes events older than the retention, and, on
// Postgres, listens (Listener) for the events other daemons commit and
// gives them to this daemon's subscribers of the thread in order.
//
// Numbering: the daemon that runs a thread is its single writer. The first
// notification of a thread this daemon numbers continues from the stored
// maximum, and so does the first one after it delivered events another
// daemon wrote (the thread moved), so sequence numbers survive restarts and
// hand-overs.
//
// It imports the hub and the store's interface; it must not import the
// transports (internal/server, internal/httpapi) or cmd.
package eventlog
