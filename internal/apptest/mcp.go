package apptest

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// bearer is an http.RoundTripper that sends a token, as a host configured
// with appserver's /mcp URL and a token does.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// MCPHTTP is the streamable HTTP transport to the daemon's /mcp with a
// token ("" sends none).
func (d *Daemon) MCPHTTP(token string) *mcp.StreamableClientTransport {
	tr := &mcp.StreamableClientTransport{Endpoint: d.URL("/mcp")}
	if token != "" {
		tr.HTTPClient = &http.Client{Transport: bearer{token}}
	}
	return tr
}

// MCPConnect connects a go-sdk MCP client over tr, closed when the test
// ends; elicit answers elicitations (nil: the client declares no
// elicitation support).
func MCPConnect(t testing.TB, tr mcp.Transport, elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "mcp-e2e", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: elicit})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// CallTool calls one of the daemon's MCP tools (codex, codex-reply) and
// returns its text, the threadId of its structured content and isError.
func CallTool(t testing.TB, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (text, thread string, isErr bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	require.Len(t, res.Content, 1)
	text = res.Content[0].(*mcp.TextContent).Text
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		var sc struct{ ThreadID, Content string }
		require.NoError(t, json.Unmarshal(b, &sc))
		require.Equal(t, text, sc.Content)
		thread = sc.ThreadID
	}
	return text, thread, res.IsError
}
