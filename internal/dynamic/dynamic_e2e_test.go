package dynamic_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

func TestDynamicToolCallRoundTrip(t *testing.T) {
	for name, storeArgs := range apptest.StoreBackends(t) {
		t.Run(name, func(t *testing.T) {
			fake := apptest.StartFake(t, `{"steps":[
				{"tool_calls":[{"call_id":"call_w1","name":"lookup_weather","arguments":{"city":"Paris"}}]},
				{"match":{"call_output":"call_w1"},"text":"It is sunny in Paris."}]}`)
			d := apptest.Start(t, append(storeArgs, apptest.FakeArgs(fake, "responses")...)...)
			r := d.RPC(t)
			threadID := apptest.StartThread(t, r, map[string]any{"dynamicTools": []any{apptest.WeatherTool}})
			r.Methods()

			r.Call("turn/start", map[string]any{"threadId": threadID, "input": []any{map[string]any{"type": "text", "text": "weather?"}}})
			req := r.Until("item/tool/call")
			require.NotNil(t, req.ID)
			var p struct {
				ThreadID  string          `json:"threadId"`
				TurnID    string          `json:"turnId"`
				CallID    string          `json:"callId"`
				Namespace *string         `json:"namespace"`
				Tool      string          `json:"tool"`
				Arguments json.RawMessage `json:"arguments"`
			}
			require.NoError(t, json.Unmarshal(req.Params, &p))
			require.Equal(t, threadID, p.ThreadID)
			require.Equal(t, "call_w1", p.CallID)
			require.Equal(t, "lookup_weather", p.Tool)
			require.Nil(t, p.Namespace)
			require.JSONEq(t, `{"city":"Paris"}`, string(p.Arguments))
			r.Reply(req.ID, map[string]any{"contentItems": []any{map[string]any{"type": "inputText", "text": "Sunny, 21C"}}, "success": true})

			done := r.Until("turn/completed")
			var tr apptest.TurnResult
			require.NoError(t, json.Unmarshal(done.Params, &tr))
			require.Equal(t, "completed", tr.Turn.Status)
			require.Equal(t, "It is sunny in Paris.", tr.Turn.Items[0].Text)

			// The model received the client's answer as the function output.
			reqs := fake.Requests()
			require.Len(t, reqs, 2)
			require.Contains(t, string(reqs[1].Body), "Sunny, 21C")
			require.Contains(t, string(reqs[1].Body), "call_w1")

			// The dynamicToolCall item is persisted with its result.
			items := r.Call("thread/items/list", map[string]any{"threadId": threadID})
			require.Contains(t, string(items), `"type":"dynamicToolCall"`)
			require.Contains(t, string(items), `"success":true`)
		})
	}
}

func TestNamespacedDynamicToolIsCalledAsNsDotTool(t *testing.T) {
	fake := apptest.StartFake(t, `{"steps":[
		{"tool_calls":[{"call_id":"call_n1","name":"weather.lookup","arguments":{"city":"Oslo"}}]},
		{"match":{"call_output":"call_n1"},"text":"Cold."}]}`)
	d := apptest.Start(t, append([]string{"--data-dir", t.TempDir()}, apptest.FakeArgs(fake, "responses")...)...)
	r := d.RPC(t)
	ns := map[string]any{"type": "namespace", "name": "weather", "description": "Weather tools", "tools": []any{
		map[string]any{"type": "function", "name": "lookup", "description": "Look up", "inputSchema": apptest.WeatherTool["inputSchema"]},
	}}
	threadID := apptest.StartThread(t, r, map[string]any{"dynamicTools": []any{ns}})
	r.Call("turn/start", map[string]any{"threadId": threadID, "input": []any{map[string]any{"type": "text", "text": "weather?"}}})
	req := r.Until("item/tool/call")
	var p struct {
		Namespace *string `json:"namespace"`
		Tool      string  `json:"tool"`
	}
	require.NoError(t, json.Unmarshal(req.Params, &p))
	require.NotNil(t, p.Namespace)
	require.Equal(t, "weather", *p.Namespace)
	require.Equal(t, "lookup", p.Tool)
	r.Reply(req.ID, map[string]any{"contentItems": []any{map[string]any{"type": "inputText", "text": "-5C"}}, "success": true})
	var tr apptest.TurnResult
	require.NoError(t, json.Unmarshal(r.Until("turn/completed").Params, &tr))
	require.Equal(t, "completed", tr.Turn.Status)
	// The namespace spec went to the model.
	require.Contains(t, string(fake.Requests()[0].Body), `"type":"namespace"`)
}
