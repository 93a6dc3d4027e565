// Package server is appserver's JSON-RPC sessions, speaking the Codex
// app-server protocol over any transport: ServeConn starts a session on an
// rpcws.Framer (stdio's newline-delimited JSON), and Handler and
// LocalHandler upgrade an HTTP request to a websocket session (the network
// listener's, checked by Auth, and the control socket's, trusted). A
// session does not know which transport it runs on.
//
// A connection opened with a principal's token acts for that principal
// (principal.Principal on the Session): the daemon's own methods are
// refused to it, another principal's threads answer as unknown ones and
// their broadcasts do not reach it, and turns bounds what it asks of its
// threads. Without a token it is the operator, as are the control socket's
// and stdio's sessions.
//
// The sessions adapt JSON-RPC to the turns layer and the hub: each session
// is attached to the hub as a subscriber once initialized, the method
// table calls turns.Manager, and a client's answer to a server request
// settles the hub's request. It also owns initialization, the draining
// answer (the front door's drain state, read through Config.Draining),
// the per-thread order of a session's requests, the ingress limit, the
// mapping of apperr codes to JSON-RPC errors, the sessions' metrics, and
// the command/exec and process/* methods (through internal/tools/shell's
// helper), whose processes belong to the session that started them; the
// fs/* and fuzzy file search methods are internal/clientfs's.
//
// It must not import internal/httpapi or internal/frontdoor: the sessions
// and the HTTP API are sibling adapters, and the composition root gives
// both to the front door. Nor may it import internal/tools/orchestrate, a
// durable store backend or cmd.
package server
