package mcpserver

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/hub"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestToolsListMatchesReference holds tools/list to the reference's answer
// (testdata/reference_tools_list.json, captured from `codex mcp-server`
// 0.153.4): names, titles, descriptions and both schemas.
func TestToolsListMatchesReference(t *testing.T) {
	hb := hub.New(hub.Config{})
	defer hb.Close()
	s := &Server{cfg: Config{ClientName: DefaultClientName}, hub: hb, sessions: map[*session]struct{}{}}
	sess := newSession(s, Operator{})
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
	var g, w any
	require.NoError(t, json.Unmarshal(got, &g))
	require.NoError(t, json.Unmarshal(want, &w))
	require.Equal(t, w, g)
}
