// Package execclient is the client behind `appserver exec`: it runs one
// turn on a running daemon over its HTTP API (create or resume a thread,
// post the prompt and images with an Idempotency-Key, follow the thread's
// event stream, resume it when it drops) and prints the agent's text, or
// with JSON a JSONL event stream, to stdout and progress to stderr, for CI
// jobs and scripts. It never waits silently: an approval or user-input
// request is asked at the terminal or answered by a rule (ApprovalRule),
// --timeout interrupts the turn, and a thread it created for a turn the
// daemon refused is deleted again. ExitCode tells apart how a run ended
// (completed, failed, interrupted, timed out, refused, invalid output,
// daemon unreachable, request or caller refused), so that a CI job can
// tell the agent's failure from the infrastructure's.
//
// It speaks only the public HTTP API (the api package's types): it must
// not import any package of the module but api, the daemon's own packages
// (internal/server, internal/httpapi, internal/turns, ...) least of all, so
// that it sees the daemon as any bot does.
package execclient
