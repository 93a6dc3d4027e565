// Package execclient is the client behind `appserver exec`: it runs one
// turn on a running daemon over its HTTP API (create or continue a thread,
// post the prompt with an Idempotency-Key, follow the thread's event
// stream, resume it when it drops) and prints the agent's text to stdout
// and progress to stderr, for CI jobs and scripts. ExitCode tells apart how
// a run ended (completed, turn failed, daemon unreachable, request refused),
// so that a CI job can tell the agent's failure from the infrastructure's.
//
// It speaks only the public HTTP API (the api package's types): it must
// not import any package of the module but api, the daemon's own packages
// (internal/server, internal/httpapi, internal/turns, ...) least of all, so
// that it sees the daemon as any bot does.
package execclient
