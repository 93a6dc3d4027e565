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
	"github.com/appserver/appserver/internal/registry"
)

// readyMCP returns a started manager whose stdio servers (the MCP test
// server under each of names, "tests" when none) are connected, stopped by
// the test.
func readyMCP(t *testing.T, names ...string) *mcp.Manager {
	t.Helper()
	bin, err := mcptest.Build()
	require.NoError(t, err)
	if len(names) == 0 {
		names = []string{"tests"}
	}
	servers := map[string]config.MCPServer{}
	for _, name := range names {
		servers[name] = config.MCPServer{Command: bin, Enabled: true, StartupTimeoutSec: 10, ToolTimeoutSec: 10}
	}
	ready := make(chan struct{}, len(names))
	m, err := mcp.New(mcp.Config{
		Servers: servers,
		OnStatus: func(n api.McpServerStartupStatusUpdatedNotification) {
			if n.Status == string(mcp.StateReady) {
				ready <- struct{}{}
			}
		},
	})
	require.NoError(t, err)
	require.NoError(t, m.Start(context.Background()))
	t.Cleanup(m.Stop)
	for range names {
		select {
		case <-ready:
		case <-time.After(20 * time.Second): // guards a hang only
			t.Fatal("the MCP test server never became ready")
		}
	}
	return m
}

// A thread whose config turns one server off (mcp_servers.<name>.enabled
// = false, dotted or nested) is not offered that server's tools, nor can it
// call them or read its resources, while the other server's stay; with
// every server off, as codex 0.171.0, not even the resource tools are
// offered.
func TestBuildMCPServerSwitchesPerThread(t *testing.T) {
	s := newService(t, Config{MCP: readyMCP(t, "tests", "other-srv")})
	ws := workspace(t)
	build := func(cfg map[string]string) (map[string]bool, *registry.Registry) {
		tu := newTurn(t, s, ws, turnOpts{})
		tu.tc.Config = map[string]json.RawMessage{}
		for k, v := range cfg {
			tu.tc.Config[k] = json.RawMessage(v)
		}
		specs, reg, err := s.Build(tu.tc)
		require.NoError(t, err)
		return specNames(specs), reg
	}

	names, _ := build(nil)
	require.True(t, names["ns:mcp__tests"], "%v", names)
	require.True(t, names["ns:mcp__other_srv"], "%v", names)

	for _, cfg := range []map[string]string{
		{"mcp_servers.other-srv.enabled": "false"},
		{"mcp_servers.other-srv.enabled": "false", "mcp_servers.tests.enabled": "true"},
	} {
		names, reg := build(cfg)
		require.True(t, names["ns:mcp__tests"], "%v", names)
		require.False(t, names["ns:mcp__other_srv"], "%v", names)
		require.True(t, names[mcp.ListResourcesName], "%v", names)
		_, served := reg.Handler("mcp__other_srv", "echo")
		require.False(t, served, "a server turned off is not callable either")
		h, ok := reg.Handler("", mcp.ReadResourceName)
		require.True(t, ok)
		_, err := h.Handle(context.Background(), registry.Invocation{Call: registry.Call{Name: mcp.ReadResourceName, CallID: "c1",
			Payload: registry.FunctionPayload{Arguments: `{"server":"other-srv","uri":"test://greeting"}`}}})
		require.ErrorContains(t, err, "disabled for this thread")
	}

	names, _ = build(map[string]string{"mcp_servers.other-srv.enabled": "false", "mcp_servers.tests.enabled": "false"})
	for n := range names {
		require.NotContains(t, n, "mcp", "%v", names)
	}
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
