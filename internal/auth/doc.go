// Package auth authenticates websocket upgrades the way codex app-server
// 0.169.0 does (docs/protocol.md §1.2): no auth (loopback only), a capability token
// compared by SHA-256 digest, or an HS256-signed JWT bearer token.
//
// It also knows the principals' bearer tokens (by SHA-256 digest) and says
// who a request is (Identify): a principal by its token, or the operator.
// What a principal may then reach is internal/principal's.
//
// It also issues and checks the credentials a browser presents where it
// cannot send an Authorization header (Browser): single-use tickets and
// session cookies, kept in the store so that every daemon of a shared
// database takes them; Identify is the one rule of which credential a
// request at each door stands for.
//
// It owns the credential check only; the websocket server, the HTTP API and
// the /mcp endpoint all call it. It must not import any package of the
// module but internal/apperr and internal/store (the interface, for the
// browser credentials), in particular neither internal/server nor
// internal/httpapi, which depend on it.
package auth
