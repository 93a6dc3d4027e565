package mcpserver

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/hub"
)

// A call whose context has ended (its host cancelled it, and its turn is
// being interrupted) takes no approval. Taken, the approval would fail to
// be asked at once and go back to the hub, which would offer it to the
// session again, over and over, until the interrupt settled it.
func TestEndingCallTakesNoApproval(t *testing.T) {
	elicit := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "cancel"}, nil
	}
	sess, _ := connectSession(t, &mcp.ClientOptions{ElicitationHandler: elicit})
	require.True(t, sess.elicits())

	callCtx, cancel := context.WithCancel(t.Context())
	c := newCall(sess, callCtx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}}, "th")
	sess.mu.Lock()
	sess.calls["th"] = c
	sess.mu.Unlock()
	cancel()
	r := &hub.Request{Kind: hub.KindApproval, ThreadID: "th", Method: "item/commandExecution/requestApproval"}
	require.False(t, sess.Request(r, 1))
	sess.mu.Lock()
	defer sess.mu.Unlock()
	require.Empty(t, sess.asks)
}
