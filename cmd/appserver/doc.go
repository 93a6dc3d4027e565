// Command appserver is the daemon that runs coding-agent conversations for
// remote clients over websocket JSON-RPC (Codex app-server protocol v2).
//
// It only dispatches: serve, app-server, mcp and migrate run in
// internal/serve (which reads their flags and configuration and wires
// every service), exec in internal/execclient, mockmodel in
// internal/model/fakemodel; it owns the exit statuses and the version.
// Product logic belongs in the internal packages, where it can be tested
// without starting the daemon, and the daemon is tested end to end
// through internal/apptest.
//
// It may import every package of the module; no package may import it, test
// files included.
package main
