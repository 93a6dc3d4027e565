// Package mcp connects the daemon to the MCP servers of [mcp_servers] and
// offers their tools and resources to the model (docs/tools.md §1.7, §1.9,
// §2.13).
//
// It owns:
//   - one connection per enabled server, through the official Go SDK: a
//     stdio server runs in a process group of its own (killed on Stop and
//     reload, its stderr logged with bounds), a streamable HTTP server gets
//     its bearer token and headers; each connection has a supervisor
//     goroutine that starts it within startup_timeout_sec and restarts it
//     with backoff when it dies;
//   - the tools of the connected servers, offered as codex 0.171.0 offers
//     them: one namespace spec mcp__<server> per server, described by the
//     server's instructions, with the tools under their own names (plain
//     functions under their qualified names, mcp__server__tool, for a
//     provider without namespaces; the qualified name is served either
//     way), every name sanitized to [A-Za-z0-9_] and capped at 64 bytes
//     with a hash suffix; without the servers the thread's config turns
//     off (Turn.Disabled), the resource tools, the mcpToolCall items of their
//     calls, and their outputs shaped as the reference's (a wall time
//     header, then the structured JSON or one content item per block);
//   - for a turn that defers them (Turn.DeferTools: the model's catalog
//     entry supports the search tool), the tool_search tool in their place:
//     a BM25 index of the tools, answered as mcp__<server> namespaces of
//     deferred functions, which the model then calls in the namespaced
//     form;
//   - approvals (by default before every tool not annotated read-only,
//     as the reference) and the elicitations servers
//     send, both asked through the turn's Asker (mcpServer/elicitation/
//     request);
//   - the data behind mcpServerStatus/list, mcpServer/tool/call,
//     mcpServer/resource/read and config/mcpServer/reload.
//
// A turn waits for the servers still on their first start at most
// StartupWait (1s, as codex 0.171.0), then takes what is connected; a
// server that is restarting or failed never holds back a turn, and a call
// to a server that is down fails at once with a text the model can read.
// Servers are declared the client capabilities codex 0.171.0 declares
// (elicitation in form and url mode).
//
// It depends on internal/registry, internal/config, internal/apperr and api
// only, and must not import the turns layer, a transport, another tool
// package or the store: the turns layer reaches it through Turn (see
// internal/tools/orchestrate).
package mcp
