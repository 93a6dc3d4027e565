// Package apptest is the end-to-end harness of appserver's tests: it
// starts the real daemon, in process (through internal/serve, the wiring
// the binary runs) or as a subprocess of the built binary (for kill -9,
// signals and stdio), and drives it as clients do: a JSON-RPC Client over
// any of the three transports (a websocket on the network listener, the
// websocket on the unix control socket, newline-delimited JSON on stdio),
// an HTTP client with the API's authentication and an SSE reader, and the
// scripted fake model (internal/model/fakemodel) with its script helpers.
// Postgres comes from internal/store/pgtest.
//
// Each package keeps its end-to-end tests next to its code and runs them
// with Main as its TestMain; docs/testing.md says how to write one.
//
// It is imported by test files only; it may import every package but
// cmd/appserver, and nothing but tests imports it.
package apptest
