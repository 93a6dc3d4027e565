// Package principal holds the rules of principals: the named tenants of a
// shared daemon, each with its own bearer token ([http_api.principals]),
// as opposed to the operator (the websocket's credential, or no auth on
// loopback, and `appserver mcp` on stdio), who has no limits.
//
// It answers, for every front door alike (the HTTP API, the websocket
// sessions, the /mcp endpoint), what a principal may reach:
//
//   - which threads it sees: those it created, recorded as the thread's
//     originator (Principal.Sees); another principal's thread answers as an
//     unknown one;
//   - the ceiling of its threads' sandbox and approval policy
//     (principal_max_sandbox, principal_max_approval), network access
//     included;
//   - its workspace roots: every directory a thread of it works in (cwd)
//     or may write (writable roots, workspace roots a request names),
//     resolved through symlinks and "..", must lie inside them; the
//     daemon's own state (data directory, config, token files) and other
//     principals' roots never do. A thread started without a cwd gets the
//     principal's first root, by default a directory of its own under
//     principal_workspaces, created 0700 on first use.
//
// The turns layer applies the ceiling and the roots to the settings a
// request leaves a thread with (Principal.Bound, through turns.Caller), so
// that whatever door or parameter set them (cwd, sandbox, sandboxPolicy,
// permissions, config.default_permissions), they are checked once, after
// the defaults and the thread's own settings are filled in.
//
// It imports only api and apperr: the transports, turns and the
// composition root depend on it, never the reverse.
package principal
