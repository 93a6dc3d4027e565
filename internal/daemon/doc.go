// Package daemon builds the services every front door shares from one
// configuration: the store (through the group committer), the hub, the
// skill catalog and its watcher, the MCP connections, the built-in tools
// and the turns manager, and with Postgres the cluster node that leases
// threads to this daemon among those sharing the database; and it names
// the steps of their shutdown, in order. internal/serve adds the listeners
// (websocket, HTTP API, /mcp) or the stdio sessions on top, and keeps flags
// and configuration loading.
//
// It owns the turns' telemetry: the Prometheus series and, when [otel]
// configures an exporter, the OpenTelemetry tracer provider, both behind
// turns.Observer. It is the only package (with cmd/appserver) that may
// import OpenTelemetry; archtest holds that.
//
// It is the composition root's library: it may import every service
// package, and nothing but internal/serve (and the e2e harness,
// internal/apptest) imports it.
package daemon
