// Package mcptest builds the MCP test server of internal/mcp
// (testdata/mcptestserver) for tests that need a real MCP server, and starts
// its streamable HTTP variant.
//
// It imports nothing of ours: it stands for the outside world, a server
// process the daemon connects to.
package mcptest
