// Package auth authenticates websocket upgrades the way codex app-server
// 0.169.0 does (docs/protocol.md §1.2): no auth (loopback only), a capability token
// compared by SHA-256 digest, or an HS256-signed JWT bearer token.
//
// It owns the credential check only; the websocket server and the HTTP API
// both call it. It must not import any package of the module but
// internal/apperr, in particular neither internal/server nor internal/httpapi,
// which depend on it.
package auth
