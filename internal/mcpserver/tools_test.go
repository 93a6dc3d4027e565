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

// TestToolsListMatchesReference holds tools/list to the reference's answer
// (testdata/reference_tools_list.json, captured from `codex mcp-server`
// 0.153.4): names, titles and both schemas, descriptions aside (ours are
// our own words; the capture keeps none).
func TestToolsListMatchesReference(t *testing.T) {
	hb := hub.New(hub.Config{})
	defer hb.Close()
	s := &Server{cfg: Config{ClientName: DefaultClientName}, hub: hb, sessions: map[*session]struct{}{}}
	sess := newSession(s, principal.Operator())
	defer hb.Detach(sess.id)

	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := sess.srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	defer cs.Close()

	res, err := cs.ListTools(ctx, nil)
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
