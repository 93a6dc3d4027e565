package mcp

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/mcp/mcptest"
	"github.com/appserver/appserver/internal/registry"
)

// The reference "everything" server over stdio: mcpServerStatus/list
// shows it connected with its tools and resources; the model calls its
// echo and get-sum tools (with mcpToolCall items) and reads one of its
// resources through read_mcp_resource.
func TestEverythingServer(t *testing.T) {
	sc := stdioServer(t)
	sc.Command, sc.Args = mcptest.Everything(t), []string{"stdio"}
	h := newHarness(t, map[string]config.MCPServer{"everything": sc})
	h.waitState("everything", StateReady)

	list, err := h.m.StatusList(context.Background(), api.McpServerStatusListParams{})
	require.NoError(t, err)
	require.Len(t, list.Data, 1)
	st := list.Data[0]
	require.Equal(t, "everything", st.Name)
	require.Equal(t, "connected", *st.RuntimeStatus)
	require.Contains(t, st.Tools, "echo")
	require.Contains(t, st.Tools, "get-sum")
	// The server offers its URL-elicitation tool only to a client that
	// declares capabilities.elicitation.url, as codex 0.171.0 does.
	_, url := st.Tools["trigger-url-elicitation"]
	require.True(t, url, "the URL-elicitation tool is listed")
	var uris []string
	for _, r := range st.Resources {
		var res struct{ URI string }
		require.NoError(t, json.Unmarshal(r, &res))
		uris = append(uris, res.URI)
	}
	const doc = "demo://resource/static/document/architecture.md"
	require.Contains(t, uris, doc)

	rec := &recorder{}
	specs, reg := h.build(rec.turn())
	require.Contains(t, specNames(specs), "mcp__everything__echo")
	// The server's instructions describe its namespace, as codex 0.171.0
	// sends them.
	for _, s := range specs {
		if ns, ok := s.Spec.(registry.NamespaceSpec); ok && ns.Name == "mcp__everything" {
			require.Contains(t, ns.Description, "Everything Server")
		}
	}

	out := call(t, reg, "mcp__everything__echo", `{"message":"hello from appserver"}`)
	require.True(t, out.Output.Succeeded(), out.Output.Text)
	require.Contains(t, body(t, out.Output), "hello from appserver")
	item := rec.lastDone(t)
	require.Equal(t, api.StatusCompleted, item.Status)
	require.Equal(t, "everything", item.Server)
	require.Equal(t, "echo", item.Tool)

	// '-' becomes '_' in the name the model calls (codex 0.171.0).
	out = call(t, reg, "mcp__everything__get_sum", `{"a":19,"b":23}`)
	require.True(t, out.Output.Succeeded(), out.Output.Text)
	require.Contains(t, body(t, out.Output), "42")
	require.Equal(t, "get-sum", rec.lastDone(t).Tool)

	out = call(t, reg, ReadResourceName, `{"server":"everything","uri":"`+doc+`"}`)
	require.True(t, out.Output.Succeeded(), out.Output.Text)
	require.Contains(t, out.Output.Text, doc)
	require.Contains(t, out.Output.Text, "text/markdown")
}
