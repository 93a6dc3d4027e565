// Package httpapi serves the HTTP/JSON API for CI bots and scripts
// (api/openapi.yaml, which it serves at /v1/openapi.yaml), mounted by the
// server at /v1 on the websocket's listener: create and list threads, post
// turns (idempotently, optionally waiting for the result), read turns and
// items, stream a thread's events as server-sent events, and answer dynamic
// tool calls.
//
// It adapts HTTP to the thread table and the hub like the websocket
// sessions do, through the small interface it declares (Threads): what it
// says about a turn (its status, items and token usage, and whether it
// ended) comes from the thread table's read side, never from the
// notifications it recorded. Each thread the API touches gets an event
// log: a hub subscriber (a recorder) that follows the thread under its own
// connection id (Hub.Follow), records the thread's notifications in a
// bounded ring with per-thread sequence numbers (streams resume from any of
// them without a gap) and holds the thread's server requests for HTTP
// clients: dynamic tool calls and approvals and user-input requests.
// Answers settle the same hub requests websocket answers do, so each is
// answered exactly once, whichever transport answers first. A log with
// nothing to do detaches after Config.IdleDetach so the thread can unload.
//
// Auth is the websocket's authenticator (the operator's credential, which
// sees every thread, and the principals' tokens); browsers trade a token
// for a single-use ticket or the session cookie (/v1/auth/..., Browser),
// which each route takes as its door says (auth.Identify); the principals' rules
// (internal/principal) say what a principal sees and may ask for, as they
// do on the other doors: the threads it created (the thread's originator
// records the creating principal), within its ceiling and workspace roots.
// Errors are application/problem+json with a stable type per class
// (api.Problem*); a principal asking beyond its bounds gets 403.
//
// It must not import internal/server (nor internal/server/rpcws): the
// websocket server and this package are sibling adapters of the hub and
// turns, and the composition root mounts this one on the server's router.
// Nor may it import internal/tools/..., any store backend or cmd: the
// Idempotency-Key claims go through the interface it declares
// (IdempotencyKeys).
package httpapi
