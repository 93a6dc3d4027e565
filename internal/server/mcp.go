package server

import (
	"context"
	"maps"
	"slices"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/mcp"
)

// MCPConfig configures the MCP methods.
type MCPConfig struct {
	// Manager owns the MCP connections; required.
	Manager *mcp.Manager
	// Reload reads the [mcp_servers] tables again (config/mcpServer/
	// reload); nil answers the method with the servers unchanged.
	Reload func() (map[string]config.MCPServer, error)
}

// registerMCP serves mcpServerStatus/list, mcpServer/tool/call,
// mcpServer/resource/read and config/mcpServer/reload from the MCP
// manager.
func (s *Server) registerMCP(cfg MCPConfig) {
	m := cfg.Manager
	s.Handle(api.MethodMcpServerStatusList, func(ctx context.Context, c *Call) (any, error) {
		var p api.McpServerStatusListParams
		if err := DecodeParams(c, &p); err != nil {
			return nil, err
		}
		return m.StatusList(ctx, p)
	})
	s.Handle(api.MethodMcpServerToolCall, func(ctx context.Context, c *Call) (any, error) {
		var p api.McpServerToolCallParams
		if err := DecodeParams(c, &p, "threadId", "server", "tool"); err != nil {
			return nil, err
		}
		// Outside a turn: no item, and the server's elicitations are
		// declined.
		res, _, err := m.CallTool(ctx, nil, "", p.Server, p.Tool, p.Arguments)
		if err != nil {
			return nil, err
		}
		return res, nil
	})
	s.Handle(api.MethodMcpServerResourceRead, func(ctx context.Context, c *Call) (any, error) {
		var p api.McpResourceReadParams
		if err := DecodeParams(c, &p, "server", "uri"); err != nil {
			return nil, err
		}
		contents, err := m.ReadResource(ctx, p.Server, p.URI)
		if err != nil {
			return nil, err
		}
		return api.McpResourceReadResult{Contents: contents}, nil
	})
	s.Handle(api.MethodConfigMcpServerReload, func(ctx context.Context, c *Call) (any, error) {
		if cfg.Reload == nil {
			return api.McpServerRefreshResult{}, nil
		}
		servers, err := cfg.Reload()
		if err == nil {
			err = m.Reload(servers)
		}
		names := append([]string{}, slices.Sorted(maps.Keys(servers))...)
		s.cfg.Audit.Record(ctx, audit.Entry{Kind: audit.KindAdmin, Detail: adminDetail{Action: c.Method, Servers: names, Error: errText(err)}})
		if err != nil {
			return nil, err
		}
		return api.McpServerRefreshResult{}, nil
	})
}

// adminDetail is the detail of an admin entry: an action on the daemon's
// own services, which every client's threads share.
type adminDetail struct {
	// Action is the method that acted.
	Action string `json:"action"`
	// Servers are the MCP servers configured after a reload.
	Servers []string `json:"servers"`
	// Error says why the action failed; absent when it was done.
	Error string `json:"error,omitempty"`
}
