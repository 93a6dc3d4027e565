// Package audit keeps the daemon's audit log: an append-only record of
// approvals and their answers, tool calls with their decision path,
// configuration writes, thread deletions and the operator's actions, each
// with who did it (principal and client), where (node) and under which
// trace. Entries are queued for the store's group committer, so that they
// ride the transcript's commit rounds; the log flushes what no round took
// and prunes entries past their retention.
//
// It imports apperr, service and store of ours, and nothing above the
// store (internal/archtest); the doors and the tool layer record through
// it, and the HTTP API reads it back from the store.
package audit
