// Package memory is a store.Store kept in process memory. The turns layer
// keeps ephemeral threads in it: they get the transcript semantics of the
// durable stores (Seqs, cursors, errors; the storetest contract suite
// checks them) without ever reaching a database, and vanish with the
// process or when Forget drops them.
//
// It must not import the SQL backends (internal/store/postgres,
// internal/store/sqlite) or anything above the store; the reads it shares
// with them come from internal/store/internal/backend.
package memory
