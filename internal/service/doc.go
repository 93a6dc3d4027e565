// Package service is the one life cycle of the daemon's long-lived
// services (the event log, the Postgres notifier, the cluster node, the
// MCP connections): a Service starts and stops, each idempotently, and
// Base gives a service that shape with the goroutines it owns.
package service
