package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/mcp"
	"github.com/appserver/appserver/internal/mcp/mcptest"
)

// GET /v1/mcp-servers lists the configured servers as mcpServerStatus/list
// does: a connected stdio server with its tools, and its resources unless
// detail=toolsAndAuthOnly; a server that never starts is listed failed.
func TestListMCPServers(t *testing.T) {
	bin, err := mcptest.Build()
	require.NoError(t, err)
	connected := make(chan struct{}, 1)
	m, err := mcp.New(mcp.Config{
		Servers: map[string]config.MCPServer{
			"t":    {Command: bin, Enabled: true, StartupTimeoutSec: 10, ToolTimeoutSec: 10},
			"gone": {Command: "/nonexistent/mcp-server", Enabled: true, StartupTimeoutSec: 1, ToolTimeoutSec: 1},
		},
		OnStatus: func(n api.McpServerStartupStatusUpdatedNotification) {
			if n.Name == "t" && n.Status == string(mcp.StateReady) {
				connected <- struct{}{}
			}
		},
		MinBackoff: time.Minute, MaxBackoff: time.Minute,
	})
	require.NoError(t, err)
	require.NoError(t, m.Start(context.Background()))
	t.Cleanup(m.Stop)
	select {
	case <-connected:
	case <-time.After(20 * time.Second): // guards a hang only
		t.Fatal("the MCP test server never connected")
	}

	e := newEnv(t, envOpts{token: "op", config: func(c *Config) { c.MCP = m }})
	r := e.do(req{method: "GET", path: "/v1/mcp-servers", token: tok("")})
	require.Equal(t, http.StatusUnauthorized, r.status)

	var list api.McpServerStatusListResult
	r = e.do(req{method: "GET", path: "/v1/mcp-servers"})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.NoError(t, json.Unmarshal(r.body, &list))
	require.Len(t, list.Data, 2)
	gone, srv := list.Data[0], list.Data[1]
	require.Equal(t, "gone", gone.Name)
	require.Contains(t, []string{"starting", "failed"}, *gone.RuntimeStatus)
	require.Equal(t, "t", srv.Name)
	require.Equal(t, "connected", *srv.RuntimeStatus)
	require.Contains(t, srv.Tools, "echo")
	require.NotEmpty(t, srv.Resources, "full detail lists the resources")
	require.Nil(t, list.NextCursor)

	r = e.do(req{method: "GET", path: "/v1/mcp-servers?detail=toolsAndAuthOnly"})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.NoError(t, json.Unmarshal(r.body, &list))
	require.Contains(t, list.Data[1].Tools, "echo")
	require.Empty(t, list.Data[1].Resources)

	r = e.do(req{method: "GET", path: "/v1/mcp-servers?detail=everything"})
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, api.ProblemInvalidRequest, r.problem(t).Type)

	bare := newEnv(t, envOpts{})
	r = bare.do(req{method: "GET", path: "/v1/mcp-servers"})
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"data":[],"nextCursor":null}`, string(r.body))
}
