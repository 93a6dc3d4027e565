package mcp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/config"
)

// everythingBin is the reference MCP server from npm
// (@modelcontextprotocol/server-everything, pinned), which
// scripts/test-deps.sh installs into .tools/ of the checkout. Without it
// the test is skipped, and under CI=true it fails.
func everythingBin(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", ".tools", "server-everything", "node_modules", ".bin", "mcp-server-everything")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the reference MCP server is missing (run scripts/test-deps.sh): %v", err)
		}
		t.Skipf("the reference MCP server is missing (run scripts/test-deps.sh): %v", err)
	}
	return bin
}

// The reference "everything" server over stdio: mcpServerStatus/list
// shows it connected with its tools and resources; the model calls its
// echo and get-sum tools (with mcpToolCall items) and reads one of its
// resources through read_mcp_resource.
func TestEverythingServer(t *testing.T) {
	sc := stdioServer(t)
	sc.Command, sc.Args = everythingBin(t), []string{"stdio"}
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

	out := call(t, reg, "mcp__everything__echo", `{"message":"hello from appserver"}`)
	require.True(t, out.Output.Succeeded(), out.Output.Text)
	require.Contains(t, body(t, out.Output), "hello from appserver")
	item := rec.lastDone(t)
	require.Equal(t, api.StatusCompleted, item.Status)
	require.Equal(t, "everything", item.Server)
	require.Equal(t, "echo", item.Tool)

	out = call(t, reg, "mcp__everything__get-sum", `{"a":19,"b":23}`)
	require.True(t, out.Output.Succeeded(), out.Output.Text)
	require.Contains(t, body(t, out.Output), "42")
	require.Equal(t, "get-sum", rec.lastDone(t).Tool)

	out = call(t, reg, ReadResourceName, `{"server":"everything","uri":"`+doc+`"}`)
	require.True(t, out.Output.Succeeded(), out.Output.Text)
	require.Contains(t, out.Output.Text, doc)
	require.Contains(t, out.Output.Text, "text/markdown")
}
