// Package server is appserver's network edge: one chi router serving health
// probes, Prometheus metrics and websocket upgrades, and JSON-RPC sessions
// speaking the Codex app-server protocol over those websockets.
//
// The websocket sessions adapt JSON-RPC to the turns layer and the hub:
// each session is attached to the hub as a subscriber, the method table
// calls turns.Manager, and a client's answer to a server request settles
// the hub's request. It also owns the
// ingress limit, the mapping of apperr codes to JSON-RPC errors, metrics and
// the command/exec methods (through internal/tools/shell's helper).
//
// It must not import internal/httpapi: the two are sibling adapters, and the
// composition root mounts the HTTP API on this package's router. Nor may it
// import internal/tools/orchestrate, a durable store backend or cmd.
package server
