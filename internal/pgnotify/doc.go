// Package pgnotify is a daemon's one LISTEN connection to Postgres: the
// services that hear NOTIFY (the event log's cross-daemon fan-out, the
// cluster's forwarded commands) each subscribe to a channel, and the
// Notifier holds one dedicated connection that LISTENs on all of them,
// reconnecting with backoff after failures and telling every subscriber
// when it has (re)connected, so that each catches up on what it may have
// missed in its own way.
package pgnotify
