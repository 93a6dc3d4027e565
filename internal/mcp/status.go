package mcp

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
)

// runtimeStatus maps a state to the protocol's McpServerConnectionStatus.
func runtimeStatus(st State) string {
	switch st {
	case StateReady:
		return "connected"
	case StateFailed:
		return "failed"
	case StateDisabled:
		return "disabled"
	}
	return "starting"
}

// StatusList answers mcpServerStatus/list: the configured servers sorted
// by name, with their connection state, tools and (unless detail is
// "toolsAndAuthOnly") resources and templates. Servers are shared by every
// thread, so threadId does not change the answer. cursor is an offset.
func (m *Manager) StatusList(ctx context.Context, p api.McpServerStatusListParams) (api.McpServerStatusListResult, error) {
	servers := m.list()
	if p.ServerName != nil {
		var one []*server
		for _, s := range servers {
			if s.name == *p.ServerName {
				one = append(one, s)
			}
		}
		servers = one
	}
	start := 0
	if p.Cursor != nil && *p.Cursor != "" {
		n, err := strconv.Atoi(*p.Cursor)
		if err != nil || n < 0 || n > len(servers) {
			return api.McpServerStatusListResult{}, apperr.New(apperr.Invalid, "invalid cursor %q", *p.Cursor)
		}
		start = n
	}
	end := len(servers)
	if p.Limit != nil && *p.Limit > 0 && start+int(*p.Limit) < end {
		end = start + int(*p.Limit)
	}
	full := p.Detail == nil || *p.Detail != "toolsAndAuthOnly"
	out := api.McpServerStatusListResult{Data: make(api.List[api.McpServerStatus], 0, end-start)}
	for _, s := range servers[start:end] {
		out.Data = append(out.Data, m.status(ctx, s, full))
	}
	if end < len(servers) {
		next := strconv.Itoa(end)
		out.NextCursor = &next
	}
	return out, nil
}

// status describes one server; resources are listed live (each page
// within tool_timeout_sec) when full and the server is connected.
func (m *Manager) status(ctx context.Context, s *server, full bool) api.McpServerStatus {
	st, errText, tools, c := s.snapshot()
	rs := runtimeStatus(st)
	out := api.McpServerStatus{
		Name: s.name, RuntimeStatus: &rs, AuthStatus: "unsupported",
		Tools: api.Map[json.RawMessage]{}, Resources: api.List[json.RawMessage]{}, ResourceTemplates: api.List[json.RawMessage]{},
	}
	if s.cfg.URL != "" {
		if u, err := url.Parse(s.cfg.URL); err == nil {
			origin := u.Scheme + "://" + u.Host
			out.HTTPOrigin = &origin
		}
		if s.cfg.BearerTokenEnvVar != "" {
			out.AuthStatus = "bearerToken"
		}
	}
	for _, t := range tools {
		out.Tools[t.tool.Name] = t.raw
	}
	if st == StateFailed && tools == nil && errText != "" {
		out.ToolsError = &errText
	}
	if c == nil {
		return out
	}
	out.ServerInfo, out.ServerCapabilities = c.serverInfo, c.capabilities
	if !full {
		return out
	}
	if res, err := allPages(ctx, func(ctx context.Context, cursor string) ([]json.RawMessage, string, error) {
		return m.ListResources(ctx, s.name, cursor)
	}); err == nil {
		out.Resources = res
	}
	if res, err := allPages(ctx, func(ctx context.Context, cursor string) ([]json.RawMessage, string, error) {
		return m.ListResourceTemplates(ctx, s.name, cursor)
	}); err == nil {
		out.ResourceTemplates = res
	}
	return out
}
