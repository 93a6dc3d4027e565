package mcpserver

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/registry/spectest"
)

// connectSession returns a session of a server on a hub of its own and an
// MCP client connected to it in memory with copts; the session knows its
// server session. Both end with the test.
func connectSession(t *testing.T, copts *mcp.ClientOptions) (*session, *mcp.ClientSession) {
	t.Helper()
	hb := hub.New(hub.Config{})
	t.Cleanup(hb.Close)
	s := &Server{cfg: Config{ClientName: DefaultClientName}, hub: hb, sessions: map[*session]struct{}{}}
	sess := newSession(s, principal.Operator())
	t.Cleanup(func() { hb.Detach(sess.id) })
	st, ct := mcp.NewInMemoryTransports()
	ss, err := sess.srv.Connect(t.Context(), st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, copts).Connect(t.Context(), ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	sess.setSession(ss)
	return sess, cs
}

// TestToolsListMatchesReference holds tools/list to the reference's answer
// (testdata/reference_tools_list.json, captured from `codex mcp-server`
// 0.153.4): names, titles and both schemas, descriptions aside (ours are
// our own words; the capture keeps none).
func TestToolsListMatchesReference(t *testing.T) {
	_, cs := connectSession(t, nil)
	res, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	got, err := json.Marshal(map[string]any{"tools": res.Tools})
	require.NoError(t, err)
	want, err := os.ReadFile("testdata/reference_tools_list.json")
	require.NoError(t, err)
	g, err := spectest.WithoutDescriptions(got)
	require.NoError(t, err)
	var w any
	require.NoError(t, json.Unmarshal(want, &w))
	require.Equal(t, w, g)
}
