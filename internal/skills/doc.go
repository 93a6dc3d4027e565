// Package skills owns skill catalogs and the bounded skills namespace
// (docs/tools.md §6).
//
// A Provider is one authority: the LocalProvider scans skill roots on this
// machine (SKILL.md front matter), a RemoteProvider discovers and reads
// skills over an MCP-style HTTP endpoint. Packages and resources are opaque
// provider-owned ids, always canonical skill:// URIs; they are validated
// strictly (no query, fragment, dot segments, encoded separators or dots,
// absolute paths, or resources outside their package) and never treated as
// local paths by the catalog.
//
// The Catalog combines the providers. It serves the model through the
// skills namespace (Register: skills.list and skills.read, offered only
// when a provider is configured) and clients through SkillsList
// (skills/list); a Watcher polls the local roots so the server can emit
// skills/changed.
//
// Every successful tool result is at most PageBudgetBytes (8 000) of JSON,
// measured on the exact bytes sent, escaping included, and so below the
// 8 192-byte hard cap MaxResultBytes: listings are paged (at most 20 skills
// a page), reads return the resource in pieces whose concatenation is the
// resource byte for byte, never splitting a UTF-8 sequence. Continuation
// cursors are opaque and HMAC-signed with a per-process key; a forged,
// foreign or stale cursor is a clear error. Every read revalidates the
// package against its provider's live catalog before routing the resource
// id to that provider. Results are external context: see
// ExternalContextReporter.
//
// Like every tool handler it knows nothing about threads, storage or
// transports: it must not import internal/turns, internal/tools/orchestrate,
// the store, internal/model, internal/hub, internal/server, internal/httpapi
// or cmd.
package skills
