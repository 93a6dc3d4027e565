package httpapi

import (
	"context"
	"net/http"

	"github.com/appserver/appserver/api"
)

// MCPStatus lists the configured MCP servers with their connection state
// and tools: mcpServerStatus/list's data (internal/mcp's Manager).
type MCPStatus interface {
	// StatusList answers mcpServerStatus/list.
	StatusList(ctx context.Context, p api.McpServerStatusListParams) (api.McpServerStatusListResult, error)
}

// listMCPServers answers GET /mcp-servers: every configured server, as
// mcpServerStatus/list describes it, in one page. ?detail=toolsAndAuthOnly
// leaves out the resources, which are listed live from each connected
// server otherwise. Servers are the daemon's, not a thread's, so every
// caller sees the same list.
func (a *API) listMCPServers(w http.ResponseWriter, r *http.Request) *problem {
	var p api.McpServerStatusListParams
	switch d := r.URL.Query().Get("detail"); d {
	case "", "full":
	case "toolsAndAuthOnly":
		p.Detail = &d
	default:
		return invalid("query parameter detail must be full or toolsAndAuthOnly, got %q", d)
	}
	out := api.McpServerStatusListResult{Data: api.List[api.McpServerStatus]{}}
	if a.cfg.MCP != nil {
		// Without a limit the list is one page.
		res, err := a.cfg.MCP.StatusList(r.Context(), p)
		if err != nil {
			return a.fromError(r, err)
		}
		out.Data = append(out.Data, res.Data...)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
