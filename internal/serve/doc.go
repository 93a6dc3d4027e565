// Package serve runs the daemon's commands that open the store: serve and
// app-server (the core of internal/daemon, the JSON-RPC sessions, the
// HTTP API and /mcp behind the front door on the listener --listen names,
// or one session on stdio), mcp (one MCP session on stdio) and migrate.
// It owns their flags and configuration loading, and the wiring of the
// services on top of the core, started in order and stopped in the order
// of daemon.Stops.
//
// cmd/appserver only dispatches to it; tests start the real daemon
// through it (internal/apptest) without building the binary.
//
// It may import every service package; only cmd/appserver and
// internal/apptest import it.
package serve
