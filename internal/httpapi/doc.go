// Package httpapi serves the HTTP/JSON API for CI bots and scripts
// (api/openapi.yaml, which it serves at /v1/openapi.yaml), mounted by the
// server at /v1 on the websocket's listener: create and list threads, post
// turns (idempotently, optionally waiting for the result), read turns and
// items, stream a thread's events as server-sent events, and answer dynamic
// tool calls.
//
// It adapts HTTP to turns.Manager and the hub like the websocket sessions
// do. Each thread the API touches gets an event log: a hub subscriber (a
// recorder) subscribed to the thread under its own connection id, which
// records the thread's notifications in a bounded ring with per-thread
// sequence numbers (streams resume from any of them without a gap) and
// holds the thread's server requests for HTTP clients: dynamic tool calls
// and approvals and user-input requests. Answers settle the same hub
// requests websocket answers do, so each is answered exactly once,
// whichever transport answers first. A log with nothing to do detaches after
// Config.IdleDetach so the thread can unload.
//
// Auth reuses the websocket's authenticator (the operator's credential,
// which sees every thread) and adds optional principals, each with its own
// token, that see only the threads they created: the thread's originator
// records the creating principal. Errors are application/problem+json with
// a stable type per class (api.Problem*).
//
// It must not import internal/server (nor internal/server/rpcws): the
// websocket server and this package are sibling adapters of the hub and
// turns, and the composition root mounts this one on the server's router.
// Nor may it import internal/tools/..., the durable store backends or cmd.
package httpapi
