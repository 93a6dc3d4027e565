package mcp_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// mcpGoldenScript is the flow of testdata/golden/reference/mcp_turns.jsonl
// (see mcp_capture.js there) for appserver's fake model: four calls of the
// MCP test server's tools in the namespaced form the reference offers
// (echo: text; add: read-only, structuredContent; fail: isError; image:
// text and image), each answering the previous output, then a text.
const mcpGoldenScript = `{"steps":[
	{"match":{"user_text":"Call the MCP tools"},"tool_calls":[{"call_id":"call_echo","namespace":"mcp__t","name":"echo","arguments":{"text":"hi"}}]},
	{"match":{"call_output":"call_echo"},"tool_calls":[{"call_id":"call_add","namespace":"mcp__t","name":"add","arguments":{"a":2,"b":3}}]},
	{"match":{"call_output":"call_add"},"tool_calls":[{"call_id":"call_fail","namespace":"mcp__t","name":"fail","arguments":{}}]},
	{"match":{"call_output":"call_fail"},"tool_calls":[{"call_id":"call_image","namespace":"mcp__t","name":"image","arguments":{}}]},
	{"match":{"call_output":"call_image"},"text":"MCP done."}
]}`

// mcpWireMethods are the notifications and requests the comparison keeps:
// the turn's bounds, the thread's status (waitingOnApproval while an
// approval is pending), its mcpToolCall items and the approvals. The
// per-thread mcpServer/startupStatus/updated are held to 0.171.0 by
// TestMCPBootMatchesReference.
var mcpWireMethods = map[string]bool{
	"turn/started":                  true,
	"item/started":                  true,
	"item/completed":                true,
	"mcpServer/elicitation/request": true,
	"serverRequest/resolved":        true,
	"turn/completed":                true,
}

// mcpWireFrames normalises the frames of one run that the comparison
// keeps, in order (ids, times and the message ids of the upstream items
// replaced).
func mcpWireFrames(t *testing.T, raw []string) []string {
	t.Helper()
	n := apptest.NewNormaliser()
	var out []string
	for _, data := range raw {
		var f map[string]any
		require.NoError(t, json.Unmarshal([]byte(data), &f), data)
		method, _ := f["method"].(string)
		if !mcpWireMethods[method] {
			continue
		}
		delete(f, "emittedAtMs")
		p, _ := f["params"].(map[string]any)
		if id, ok := p["threadId"].(string); ok {
			n.Name(id, "<thread>")
		}
		if id, ok := p["turnId"].(string); ok {
			n.Name(id, "<turn>")
		}
		if turn, ok := p["turn"].(map[string]any); ok {
			n.Name(turn["id"].(string), "<turn>")
		}
		if _, ok := f["id"]; ok {
			f["id"] = "<serverRequestId>"
		}
		if _, ok := p["requestId"]; ok {
			p["requestId"] = "<serverRequestId>"
		}
		if it, ok := p["item"].(map[string]any); ok && it["type"] != "mcpToolCall" {
			continue
		}
		if meta, ok := p["_meta"].(map[string]any); ok {
			// Known difference: the reference offers to remember an
			// approval for the session or always; appserver asks each time.
			delete(meta, "persist")
		}
		out = append(out, n.Frame(f))
	}
	return out
}

// mcpWallTimeRE is the wall time line the reference puts before an MCP
// tool's output.
var mcpWallTimeRE = regexp.MustCompile(`^Wall time: [0-9]+\.[0-9]{4} seconds\nOutput:`)

// mcpModelOutputs normalises the function_call_output items sent back to
// the model: the wall time becomes <s>, the item's id is dropped.
func mcpModelOutputs(t *testing.T, items []json.RawMessage) []string {
	t.Helper()
	var out []string
	for _, raw := range items {
		var it map[string]any
		require.NoError(t, json.Unmarshal(raw, &it))
		if it["type"] != "function_call_output" {
			continue
		}
		delete(it, "id")
		fix := func(s string) string {
			return mcpWallTimeRE.ReplaceAllString(s, "Wall time: <s> seconds\nOutput:")
		}
		switch o := it["output"].(type) {
		case string:
			it["output"] = fix(o)
		case []any:
			for _, c := range o {
				if m, ok := c.(map[string]any); ok {
					if s, ok := m["text"].(string); ok {
						m["text"] = fix(s)
					}
				}
			}
		}
		b, err := json.Marshal(it)
		require.NoError(t, err)
		out = append(out, string(b))
	}
	return out
}

// A turn that calls four tools of a stdio MCP server, against captures of
// codex 0.169.0 configured with the same server and driven by the same
// model script (mcp_turns.jsonl and mcp_model.json under the approval
// policy on-request, mcp_never_* under never): the mcpToolCall items, the
// approvals and the turn's frames have the reference's fields, types,
// nulls and order; the model is offered the server's tools as the
// reference offers them and gets each output back shaped as the reference
// shapes it; mcpServerStatus/list answers with the reference's fields.
func TestMCPTurnMatchesReference(t *testing.T) {
	for _, tc := range []struct{ policy, turns, model string }{
		{"on-request", "mcp_turns.jsonl", "mcp_model.json"},
		{"never", "mcp_never_turns.jsonl", "mcp_never_model.json"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			var refRaw []string
			refStatus := map[string]json.RawMessage{}
			for _, l := range apptest.ReferenceFrames(t, tc.turns) {
				if l.Dir != "recv" {
					continue
				}
				refRaw = append(refRaw, string(l.Frame))
				var resp struct {
					ID     json.RawMessage `json:"id"`
					Result json.RawMessage `json:"result"`
				}
				require.NoError(t, json.Unmarshal(l.Frame, &resp))
				// The capture's requests 3 and 4: the status list without,
				// then with the thread.
				if id := string(resp.ID); id == "3" || id == "4" {
					refStatus[id] = resp.Result
				}
			}
			require.Len(t, refStatus, 2, "the capture's mcpServerStatus/list answers")
			ref := mcpWireFrames(t, refRaw)
			data, err := os.ReadFile(filepath.Join("testdata", "golden", "reference", tc.model))
			require.NoError(t, err)
			var refModel struct {
				Namespace json.RawMessage   `json:"mcp_namespace"`
				LastInput []json.RawMessage `json:"last_input"`
			}
			require.NoError(t, json.Unmarshal(data, &refModel))

			fake := apptest.StartFake(t, mcpGoldenScript)
			d := apptest.Start(t, append(append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...),
				mcpArgs(t, `, default_tools_approval_mode="auto"`)...)...)
			r := d.RPC(t)
			waitMCPConnected(t, r)
			r.Seen = nil
			threadID := apptest.StartThread(t, r, map[string]any{"sandbox": "workspace-write", "approvalPolicy": tc.policy})
			r.Call("turn/start", map[string]any{"threadId": threadID, "input": []any{map[string]any{"type": "text", "text": "Call the MCP tools", "text_elements": []any{}}}})
			frames := append([]apptest.Frame(nil), r.Seen...)
			deadline := time.Now().Add(30 * time.Second)
			for len(frames) == 0 || frames[len(frames)-1].Method != "turn/completed" {
				require.True(t, time.Now().Before(deadline), "the turn did not complete")
				f, err := r.Read(20 * time.Second)
				require.NoError(t, err)
				frames = append(frames, f)
				if f.Method == "mcpServer/elicitation/request" {
					r.Reply(f.ID, map[string]any{"action": "accept", "content": map[string]any{}, "_meta": nil})
				}
			}
			var raw []string
			for _, f := range frames {
				if f.Method == "" {
					continue
				}
				m := map[string]any{"method": f.Method, "params": f.Params}
				if f.ID != nil {
					m["id"] = f.ID
				}
				b, err := json.Marshal(m)
				require.NoError(t, err)
				raw = append(raw, string(b))
			}
			if d := apptest.DiffTranscripts(ref, mcpWireFrames(t, raw)); d != "" {
				t.Errorf("the MCP turn's frames differ from the codex 0.169.0 reference (- reference, + appserver):\n%s", d)
			}

			reqs := fake.Requests()
			require.Len(t, reqs, len(refModel.LastInput))
			var first struct {
				Tools []json.RawMessage `json:"tools"`
			}
			require.NoError(t, reqs[0].Decode(&first))
			var ns json.RawMessage
			for _, tool := range first.Tools {
				var h struct{ Type, Name string }
				require.NoError(t, json.Unmarshal(tool, &h))
				if h.Type == "namespace" && h.Name == "mcp__t" {
					ns = tool
				}
			}
			require.NotNil(t, ns, "the request offers the server's tools as the namespace mcp__t")
			require.JSONEq(t, string(refModel.Namespace), string(ns), "the tool specs")

			var lasts []json.RawMessage
			for _, req := range reqs {
				var body struct {
					Input []json.RawMessage `json:"input"`
				}
				require.NoError(t, req.Decode(&body))
				lasts = append(lasts, body.Input[len(body.Input)-1])
			}
			want, got := mcpModelOutputs(t, refModel.LastInput), mcpModelOutputs(t, lasts)
			require.Len(t, want, 4)
			for i := range want {
				require.JSONEq(t, want[i], got[i], fmt.Sprintf("output %d to the model", i))
			}

			for id, params := range map[string]map[string]any{"3": {}, "4": {"threadId": threadID, "detail": "toolsAndAuthOnly"}} {
				ours := r.Call("mcpServerStatus/list", params)
				// Known difference: without a thread the reference knows no
				// runtime state (null); appserver's servers are the
				// daemon's, so it answers theirs.
				noThread := params["threadId"] == nil
				if d := apptest.DiffTranscripts([]string{mcpStatusShape(t, refStatus[id], noThread)}, []string{mcpStatusShape(t, ours, noThread)}); d != "" {
					t.Errorf("mcpServerStatus/list %v differs from the reference (- reference, + appserver):\n%s", params, d)
				}
			}
		})
	}
}

// mcpStatusShape normalises an mcpServerStatus/list result for comparison:
// the server's tools keep one entry (echo), and runtimeStatus is dropped
// when dropRuntime is set.
func mcpStatusShape(t *testing.T, res json.RawMessage, dropRuntime bool) string {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal(res, &v))
	for _, s := range v["data"].([]any) {
		srv := s.(map[string]any)
		if dropRuntime {
			delete(srv, "runtimeStatus")
		}
		if tools, ok := srv["tools"].(map[string]any); ok {
			srv["tools"] = map[string]any{"echo": tools["echo"]}
		}
	}
	n := apptest.NewNormaliser()
	return n.Frame(map[string]any{"result": v})
}
