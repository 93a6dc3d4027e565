package orchestrate

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/mcp"
	"github.com/appserver/appserver/internal/mcp/mcptest"
)

// readyMCP returns a started manager whose one stdio server ("tests") is
// connected, stopped by the test.
func readyMCP(t *testing.T) *mcp.Manager {
	t.Helper()
	bin, err := mcptest.Build()
	require.NoError(t, err)
	ready := make(chan struct{}, 1)
	m, err := mcp.New(mcp.Config{
		Servers: map[string]config.MCPServer{"tests": {Command: bin, Enabled: true, StartupTimeoutSec: 10, ToolTimeoutSec: 10}},
		OnStatus: func(n api.McpServerStartupStatusUpdatedNotification) {
			if n.Status == string(mcp.StateReady) {
				select {
				case ready <- struct{}{}:
				default:
				}
			}
		},
	})
	require.NoError(t, err)
	require.NoError(t, m.Start(context.Background()))
	t.Cleanup(m.Stop)
	select {
	case <-ready:
	case <-time.After(20 * time.Second): // guards a hang only
		t.Fatal("the MCP test server never became ready")
	}
	return m
}

// A thread whose config empties mcp_servers (the TUI's title thread) is
// offered no MCP tool and no resource tool, while an ordinary thread of
// the same daemon gets them.
func TestBuildMCPServersEmptiedByThread(t *testing.T) {
	s := newService(t, Config{MCP: readyMCP(t)})
	ws := workspace(t)

	plain := newTurn(t, s, ws, turnOpts{})
	names := specNames(plain.specs)
	require.True(t, names["ns:mcp__tests"], "%v", names)
	require.True(t, names[mcp.ListResourcesName], "%v", names)

	for name, cfg := range map[string]map[string]string{
		"title thread":       titleThreadConfig(),
		"mcp_servers only":   {"mcp_servers": "{}"},
		"nested empty table": {"mcp_servers": " { } "},
	} {
		t.Run(name, func(t *testing.T) {
			tu := newTurn(t, s, ws, turnOpts{})
			tu.tc.Config = map[string]json.RawMessage{}
			for k, v := range cfg {
				tu.tc.Config[k] = json.RawMessage(v)
			}
			specs, reg, err := s.Build(tu.tc)
			require.NoError(t, err)
			names := specNames(specs)
			for n := range names {
				require.NotContains(t, n, "mcp", "%v", names)
			}
			_, served := reg.Handler("", "mcp__tests__echo")
			require.False(t, served, "a hidden MCP tool is not callable either")
		})
	}
}
