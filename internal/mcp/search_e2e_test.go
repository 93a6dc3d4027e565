package mcp_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/model/fakemodel"
)

// runMCPTurn runs one turn against the fake model with the MCP test
// server configured (plus extra flags) and returns the tool and status of
// its last mcpToolCall item once the turn completed.
func runMCPTurn(t *testing.T, fake *fakemodel.Server, extra ...string) (tool, status string) {
	t.Helper()
	d := apptest.Start(t, mcpDaemonArgs(t, fake, t.TempDir(), extra...)...)
	r := d.RPC(t)
	waitMCPConnected(t, r)
	return mcpTurn(t, r, apptest.StartThread(t, r, nil))
}

// mcpDaemonArgs are the flags of a daemon on dataDir with the fake model
// (Responses API) and the MCP test server, plus extra.
func mcpDaemonArgs(t *testing.T, fake *fakemodel.Server, dataDir string, extra ...string) []string {
	args := append(append([]string{"--data-dir", dataDir}, apptest.FakeArgs(fake, "responses")...), mcpArgs(t, "")...)
	return append(args, extra...)
}

// mcpTurn runs one turn of threadID and returns the tool and status of
// its last mcpToolCall item once the turn completed.
func mcpTurn(t *testing.T, r *apptest.Client, threadID string) (tool, status string) {
	t.Helper()
	r.Call("turn/start", map[string]any{"threadId": threadID, "input": []any{map[string]any{"type": "text", "text": "echo"}}})
	var completed struct {
		Item struct {
			Type   string `json:"type"`
			Tool   string `json:"tool"`
			Status string `json:"status"`
		} `json:"item"`
	}
	for completed.Item.Type != "mcpToolCall" {
		require.NoError(t, json.Unmarshal(r.Until("item/completed").Params, &completed))
	}
	var tr apptest.TurnResult
	require.NoError(t, json.Unmarshal(r.Until("turn/completed").Params, &tr))
	require.Equal(t, "completed", tr.Turn.Status)
	return completed.Item.Tool, completed.Item.Status
}

// searchRequest is the part of a Responses request the tool_search tests
// read.
type searchRequest struct {
	Tools []struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Execution string `json:"execution"`
	} `json:"tools"`
	Input []json.RawMessage `json:"input"`
}

// toolNames lists a request's tools by name, tool_search by its type.
func (r searchRequest) toolNames() map[string]bool {
	names := map[string]bool{}
	for _, t := range r.Tools {
		if t.Type == "tool_search" {
			names["tool_search"] = t.Execution == "client"
			continue
		}
		names[t.Name] = true
	}
	return names
}

// A model whose catalog entry supports the search tool gets tool_search
// in place of the MCP tools; its search is answered with the matching
// tools in their mcp__t namespace, deferred; it then calls one in the
// namespaced form, which runs; and every later request replays the
// search call and its output.
func TestMCPToolSearchInATurn(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[
		{"tool_calls":[{"type":"tool_search","call_id":"call_s1","name":"tool_search","arguments":{"query":"echo text back","limit":1}}]},
		{"match":{"call_output":"call_s1"},"tool_calls":[{"call_id":"call_e1","namespace":"mcp__t","name":"echo","arguments":{"text":"found"}}]},
		{"match":{"call_output":"call_e1"},"text":"Echoed."}]}`)
	tool, status := runMCPTurn(t, fake, "-c", `models.fake-model={supports_search_tool=true}`)
	require.Equal(t, "completed", status)
	require.Equal(t, "echo", tool)

	reqs := fake.Requests()
	require.Len(t, reqs, 3)
	var first, second, third searchRequest
	require.NoError(t, json.Unmarshal(reqs[0].Body, &first))
	require.NoError(t, json.Unmarshal(reqs[1].Body, &second))
	require.NoError(t, json.Unmarshal(reqs[2].Body, &third))
	names := first.toolNames()
	require.True(t, names["tool_search"], "%v", names)

	// The spec and the search's answer are codex 0.169.0's for a catalog
	// model (gpt-5.5) with the same server (mcp_search_model.json, taken
	// as mcp_capture.js takes its files).
	data, err := os.ReadFile(filepath.Join("testdata", "golden", "reference", "mcp_search_model.json"))
	require.NoError(t, err)
	var ref struct {
		ToolSearch json.RawMessage   `json:"tool_search"`
		Search     []json.RawMessage `json:"search_call_and_output"`
	}
	require.NoError(t, json.Unmarshal(data, &ref))
	var raw struct {
		Tools []json.RawMessage `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(reqs[0].Body, &raw))
	var spec json.RawMessage
	for _, tool := range raw.Tools {
		var h struct{ Type string }
		require.NoError(t, json.Unmarshal(tool, &h))
		if h.Type == "tool_search" {
			spec = tool
		}
	}
	// The capture keeps the spec without its descriptions (the reference's
	// words, which ours do not repeat): the shape is compared.
	require.JSONEq(t, string(ref.ToolSearch), string(withoutDescriptions(t, spec)), "the tool_search spec")
	var refOut, ourOut struct {
		Tools json.RawMessage `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(ref.Search[1], &refOut))
	require.NoError(t, json.Unmarshal(second.Input[len(second.Input)-1], &ourOut))
	require.JSONEq(t, string(refOut.Tools), string(ourOut.Tools), "the tools the search answers with")
	require.False(t, names["mcp__t__echo"], "a deferred MCP tool is not sent: %v", names)
	require.True(t, names["list_mcp_resources"], "the resource tools are not deferred: %v", names)

	// The search call and its output, as the model gets them back (the
	// upstream item id stays home, as with every item under store=false).
	n := len(second.Input)
	require.GreaterOrEqual(t, n, 2)
	require.JSONEq(t, `{"type":"tool_search_call","call_id":"call_s1","execution":"client","arguments":{"query":"echo text back","limit":1},"status":"completed"}`, string(second.Input[n-2]))
	var out struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Status    string `json:"status"`
		Execution string `json:"execution"`
		Tools     []struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Tools []struct {
				Type         string `json:"type"`
				Name         string `json:"name"`
				DeferLoading bool   `json:"defer_loading"`
			} `json:"tools"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(second.Input[n-1], &out))
	require.Equal(t, "tool_search_output", out.Type)
	require.Equal(t, "call_s1", out.CallID)
	require.Equal(t, "completed", out.Status)
	require.Equal(t, "client", out.Execution)
	require.Len(t, out.Tools, 1, "%s", second.Input[n-1])
	require.Equal(t, "namespace", out.Tools[0].Type)
	require.Equal(t, "mcp__t", out.Tools[0].Name)
	require.Len(t, out.Tools[0].Tools, 1, "limit 1: %s", second.Input[n-1])
	require.Equal(t, "echo", out.Tools[0].Tools[0].Name)
	require.True(t, out.Tools[0].Tools[0].DeferLoading)

	// The third request replays the search pair before the namespaced call.
	require.Equal(t, string(second.Input[n-2]), string(third.Input[n-2]))
	require.Equal(t, string(second.Input[n-1]), string(third.Input[n-1]))
	require.Contains(t, string(reqs[2].Body), `"namespace":"mcp__t"`)
	require.Contains(t, string(reqs[2].Body), `echo: found`)
}

// Without the catalog flag the MCP tools are sent in full and no
// tool_search is offered; over Chat Completions the flag defers nothing.
func TestMCPToolsNotDeferredWithoutSearchTool(t *testing.T) {
	for name, tc := range map[string]struct{ wire, extra, offered string }{
		// The Responses API gets the server's namespace, Chat Completions
		// (no namespaces) the plain functions.
		"no flag":          {"responses", `models.fake-model={display_name="Fake"}`, `"name":"mcp__t","description":"Tools in the mcp__t namespace."`},
		"chat completions": {"chat", `models.fake-model={supports_search_tool=true}`, `"name":"mcp__t__echo"`},
	} {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[{"text":"Hi."}]}`)
			args := append(append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, tc.wire)...), mcpArgs(t, "")...)
			d := apptest.Start(t, append(args, "-c", tc.extra)...)
			r := d.RPC(t)
			waitMCPConnected(t, r)
			threadID := apptest.StartThread(t, r, nil)
			r.Call("turn/start", map[string]any{"threadId": threadID, "input": []any{map[string]any{"type": "text", "text": "hi"}}})
			r.Until("turn/completed")
			body := string(fake.Requests()[0].Body)
			require.Contains(t, body, tc.offered)
			require.NotContains(t, body, `tool_search`)
		})
	}
}

// The search call and its output are part of the thread's history: after
// a restart, the next turn replays them, byte for byte, where they were.
func TestMCPToolSearchReplayedAfterRestart(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[
		{"match":{"user_text":"echo"},"tool_calls":[{"type":"tool_search","call_id":"call_s1","name":"tool_search","arguments":{"query":"echo"}}]},
		{"match":{"call_output":"call_s1"},"tool_calls":[{"call_id":"call_e1","namespace":"mcp__t","name":"echo","arguments":{"text":"found"}}]},
		{"match":{"call_output":"call_e1"},"text":"Echoed."},
		{"match":{"user_text":"again"},"text":"Again."}]}`)
	dataDir := t.TempDir()
	flag := `models.fake-model={supports_search_tool=true}`
	d := apptest.Start(t, mcpDaemonArgs(t, fake, dataDir, "-c", flag)...)
	r := d.RPC(t)
	waitMCPConnected(t, r)
	threadID := apptest.StartThread(t, r, nil)
	tool, status := mcpTurn(t, r, threadID)
	require.Equal(t, "echo", tool)
	require.Equal(t, "completed", status)
	d.Stop(t)

	d = apptest.Start(t, mcpDaemonArgs(t, fake, dataDir, "-c", flag)...)
	r = d.RPC(t)
	r.Call("thread/resume", map[string]any{"threadId": threadID})
	r.Call("turn/start", map[string]any{"threadId": threadID, "input": []any{map[string]any{"type": "text", "text": "again"}}})
	var tr apptest.TurnResult
	require.NoError(t, json.Unmarshal(r.Until("turn/completed").Params, &tr))
	require.Equal(t, "completed", tr.Turn.Status)

	reqs := fake.Requests()
	require.Len(t, reqs, 4)
	var before, after searchRequest
	require.NoError(t, json.Unmarshal(reqs[2].Body, &before))
	require.NoError(t, json.Unmarshal(reqs[3].Body, &after))
	require.GreaterOrEqual(t, len(after.Input), len(before.Input))
	for i, it := range before.Input {
		require.JSONEq(t, string(it), string(after.Input[i]), "item %d", i)
	}
	var kinds []string
	for _, it := range after.Input {
		var k struct{ Type string }
		require.NoError(t, json.Unmarshal(it, &k))
		kinds = append(kinds, k.Type)
	}
	require.Contains(t, kinds, "tool_search_call")
	require.Contains(t, kinds, "tool_search_output")
}

// withoutDescriptions is raw without its string-valued "description" keys,
// at any depth.
func withoutDescriptions(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	var strip func(any)
	strip = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			if _, ok := x["description"].(string); ok {
				delete(x, "description")
			}
			for _, e := range x {
				strip(e)
			}
		case []any:
			for _, e := range x {
				strip(e)
			}
		}
	}
	strip(v)
	out, err := json.Marshal(v)
	require.NoError(t, err)
	return out
}
