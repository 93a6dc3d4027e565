package mcp_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/mcp/mcptest"
)

// mcpArgs configures the MCP test server as "t", plus extra fields. Its
// tools run without approval unless extra sets
// default_tools_approval_mode (the auto default asks before every tool not
// annotated read-only).
func mcpArgs(t *testing.T, extra string) []string {
	t.Helper()
	bin, err := mcptest.Build()
	require.NoError(t, err)
	if !strings.Contains(extra, "default_tools_approval_mode") {
		extra += `, default_tools_approval_mode="approve"`
	}
	return []string{"-c", fmt.Sprintf(`mcp_servers.t={command=%q%s}`, bin, extra)}
}

// waitMCPConnected polls mcpServerStatus/list until server t is connected
// (the daemon connects it in the background).
func waitMCPConnected(t *testing.T, r *apptest.Client) json.RawMessage {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res := r.Call("mcpServerStatus/list", map[string]any{})
		var st struct {
			Data []struct {
				Name          string `json:"name"`
				RuntimeStatus string `json:"runtimeStatus"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(res, &st))
		if len(st.Data) == 1 && st.Data[0].RuntimeStatus == "connected" {
			return res
		}
		require.True(t, time.Now().Before(deadline), "MCP server not connected: %s", res)
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMCPToolCallInATurn(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[
		{"tool_calls":[{"call_id":"call_m1","name":"mcp__t__echo","arguments":{"text":"from the model"}}]},
		{"match":{"call_output":"call_m1"},"text":"Echoed."}]}`)
	d := apptest.Start(t, append(append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...), mcpArgs(t, "")...)...)
	r := d.RPC(t)
	status := waitMCPConnected(t, r)
	require.Contains(t, string(status), `"echo"`)
	threadID := apptest.StartThread(t, r, nil)

	r.Call("turn/start", map[string]any{"threadId": threadID, "input": []any{map[string]any{"type": "text", "text": "echo"}}})
	var started, completed struct {
		Item struct {
			Type       string          `json:"type"`
			ID         string          `json:"id"`
			Server     string          `json:"server"`
			Tool       string          `json:"tool"`
			Status     string          `json:"status"`
			Arguments  json.RawMessage `json:"arguments"`
			Result     json.RawMessage `json:"result"`
			Error      json.RawMessage `json:"error"`
			DurationMs *int64          `json:"durationMs"`
		} `json:"item"`
	}
	for started.Item.Type != "mcpToolCall" {
		require.NoError(t, json.Unmarshal(r.Until("item/started").Params, &started))
	}
	require.Equal(t, "call_m1", started.Item.ID)
	require.Equal(t, "inProgress", started.Item.Status)
	require.Equal(t, "t", started.Item.Server)
	require.Equal(t, "echo", started.Item.Tool)
	require.JSONEq(t, `{"text":"from the model"}`, string(started.Item.Arguments))
	for completed.Item.Type != "mcpToolCall" {
		require.NoError(t, json.Unmarshal(r.Until("item/completed").Params, &completed))
	}
	require.Equal(t, "completed", completed.Item.Status)
	require.JSONEq(t, `{"content":[{"type":"text","text":"echo: from the model"}],"structuredContent":null,"_meta":null}`, string(completed.Item.Result))
	require.Equal(t, "null", string(completed.Item.Error))
	require.NotNil(t, completed.Item.DurationMs)

	var tr apptest.TurnResult
	require.NoError(t, json.Unmarshal(r.Until("turn/completed").Params, &tr))
	require.Equal(t, "completed", tr.Turn.Status)
	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	require.Contains(t, string(reqs[0].Body), `{"type":"namespace","name":"mcp__t","description":"Tools in the mcp__t namespace.","tools":[`)
	require.Contains(t, string(reqs[1].Body), `echo: from the model`)
}

// A model that calls the MCP tool in codex's namespaced form (namespace
// mcp__t__, name echo) is served: the tool runs, and the call goes back
// upstream with its namespace.
func TestMCPNamespacedCallInATurn(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[
		{"tool_calls":[{"call_id":"call_n1","namespace":"mcp__t__","name":"echo","arguments":{"text":"namespaced"}}]},
		{"match":{"call_output":"call_n1"},"text":"Echoed."}]}`)
	tool, status := runMCPTurn(t, fake)
	require.Equal(t, "completed", status)
	require.Equal(t, "echo", tool)
	second := string(fake.Requests()[1].Body)
	require.Contains(t, second, `"namespace":"mcp__t__"`)
	require.Contains(t, second, `echo: namespaced`)
}

func TestMCPApprovalDeclinedOverWebsocket(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[
		{"tool_calls":[{"call_id":"call_m2","name":"mcp__t__echo","arguments":{"text":"x"}}]},
		{"match":{"call_output":"call_m2"},"text":"Not allowed."}]}`)
	d := apptest.Start(t, append(append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...),
		mcpArgs(t, `, default_tools_approval_mode="prompt"`)...)...)
	r := d.RPC(t)
	waitMCPConnected(t, r)
	threadID := apptest.StartThread(t, r, map[string]any{"approvalPolicy": "on-request"})
	r.Call("turn/start", map[string]any{"threadId": threadID, "input": []any{map[string]any{"type": "text", "text": "echo"}}})

	req := r.Until("mcpServer/elicitation/request")
	require.NotNil(t, req.ID)
	var p struct {
		ThreadID   string         `json:"threadId"`
		ServerName string         `json:"serverName"`
		Mode       string         `json:"mode"`
		Message    string         `json:"message"`
		Meta       map[string]any `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal(req.Params, &p))
	require.Equal(t, threadID, p.ThreadID)
	require.Equal(t, "t", p.ServerName)
	require.Equal(t, "form", p.Mode)
	require.Equal(t, `Allow the t MCP server to run tool "echo"?`, p.Message)
	require.Equal(t, "mcp_tool_call", p.Meta["codex_approval_kind"])
	r.Reply(req.ID, map[string]any{"action": "decline", "content": nil})

	var completed struct {
		Item struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Error  struct {
				Message string `json:"message"`
			} `json:"error"`
		} `json:"item"`
	}
	for completed.Item.Type != "mcpToolCall" {
		require.NoError(t, json.Unmarshal(r.Until("item/completed").Params, &completed))
	}
	require.Equal(t, "failed", completed.Item.Status)
	require.Equal(t, "user rejected MCP tool call", completed.Item.Error.Message)
	var tr apptest.TurnResult
	require.NoError(t, json.Unmarshal(r.Until("turn/completed").Params, &tr))
	require.Contains(t, string(fake.Requests()[1].Body), "user rejected MCP tool call")
}
