// Package mcpserver serves appserver as an MCP server: the `codex` and
// `codex-reply` tools an LLM host calls to start a coding session and to
// continue it, over stdio (`appserver mcp`) and over streamable HTTP (the
// daemon's /mcp endpoint). It is a third front door onto turns.Manager,
// beside the websocket and the HTTP API: the threads it creates are the
// same durable threads `thread/list` and `thread/read` show.
//
// Each MCP session is a hub subscriber (under a connection id of its own)
// of the threads its tool calls run on. The thread's notifications reach
// the tool call waiting on that thread and are sent to the host as
// `codex/event` notifications shaped as the reference's MCP server sent
// them ({_meta: {requestId, threadId}, id, msg: {type, …}}), plus MCP
// progress notifications when the call carries a progressToken. Command and
// patch approvals of a running call are asked of the host through MCP
// elicitation; a host that did not declare elicitation does not take the
// request, so the hub's no-client rule applies to it as to a thread with
// no client. notifications/cancelled (the call's context) interrupts the
// turn.
//
// The go-sdk sends only the notifications it knows, so the package keeps
// each session's mcp.Connection (captured when the transport connects) and
// writes `codex/event` to it directly; for streamable HTTP that is why the
// package keeps its own session table around mcp.StreamableServerTransport
// instead of mcp.StreamableHTTPHandler, which gives no access to the
// connection.
//
// It must not import internal/server or internal/httpapi: the HTTP
// endpoint's authentication comes in as a principal.Principal per request,
// whose rules (the threads it sees, its ceiling and workspace roots) the
// session passes to turns with every call.
package mcpserver
