// Package eventlog is the durable event log of threads: it numbers every
// notification the hub sends for a thread (hub.Journal), queues it for the
// store's events table (a store.EventQueue that the group committer drains
// into every commit round, so events ride the transcript's transactions;
// what no round takes within FlushDelay the Log writes itself, through the
// same committer), keeps the deltas out of the store unless other daemons
// read it (Config.StoreDeltas: a running item's numbered deltas are held
// in memory for resuming clients, a completed item's completion carries
// it whole), bounds it (the deltas of one item beyond ItemMaxBytes are
// delivered live and not numbered; a thread's log is cut to
// ThreadMaxBytes, oldest first, and events older than the retention go, by
// a pruner apart from the hot path, which then has the store reclaim the
// space), and, on Postgres, listens (Listener) for the events other
// daemons commit and gives them to this daemon's subscribers of the thread
// in order.
//
// It also serves in-process consumers of every thread's events (Consumer,
// for code of the daemon such as a webhook sender): each hears the events
// live through the hub as an all-threads subscriber, reads back from the
// log what it was not told or could not keep, and saves a durable cursor
// (the last sequence number handled per thread) through the store; one
// consumer per name holds a lease across the daemons sharing the database.
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
