package mcp_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apptest"
)

// An MCP tool call the model makes is a tool_call entry of the audit log:
// the server, the tool, its arguments and how it ended.
func TestMCPToolCallAudited(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[
		{"tool_calls":[{"call_id":"call_m1","name":"mcp__t__echo","arguments":{"text":"from the model"}}]},
		{"match":{"call_output":"call_m1"},"text":"Echoed."}]}`)
	d := apptest.Start(t, append(append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...), mcpArgs(t, "")...)...)
	r := d.RPC(t)
	waitMCPConnected(t, r)
	threadID := apptest.StartThread(t, r, nil)
	apptest.RunTurn(t, r, threadID, "echo")

	var page api.HTTPAuditList
	require.Eventually(t, func() bool {
		page = apptest.GetJSON[api.HTTPAuditList](t, d, "/v1/audit?kind=tool_call", "")
		return len(page.Data) == 1
	}, 20*time.Second, 20*time.Millisecond)
	e := page.Data[0]
	require.Equal(t, threadID, *e.ThreadID)
	require.NotNil(t, e.TurnID)
	require.JSONEq(t, `{"tool":"mcp","callId":"call_m1","server":"t","name":"echo","arguments":{"text":"from the model"},
		"approvalPolicy":"on-request","status":"completed"}`, string(e.Detail))
}
