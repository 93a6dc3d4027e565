package model

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// realEvents are events as OpenAI's Responses API streams them.
var realEvents = []string{
	`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1741290958,"status":"in_progress","error":null,"incomplete_details":null,"instructions":"You are helpful.","max_output_tokens":null,"model":"gpt-4.1","output":[],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":false,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[{"type":"function","name":"lookup","parameters":{"type":"object"},"strict":false}],"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}`,
	`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"lookup","arguments":"","status":"in_progress"}}`,
	`{"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"lookup","arguments":"{\"city\":\"Paris\"}","status":"completed"}}`,
	`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}`,
	`{"type":"response.output_item.done","sequence_number":9,"output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":"Hi \u00e9 there"}],"role":"assistant"}}`,
	`{"type":"response.completed","sequence_number":10,"response":{"id":"resp_1","object":"response","created_at":1741290958,"status":"completed","error":null,"incomplete_details":null,"model":"gpt-4.1","output":[{"type":"function_call","id":"fc_1","call_id":"call_1","name":"lookup","arguments":"{}","status":"completed"}],"usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":0},"output_tokens":87,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":123},"user":null,"metadata":{}}}`,
	`{ "type" : "response.completed" , "response" : { "id" : "r" } }`,
}

func TestQuickEventTakesRealEvents(t *testing.T) {
	for _, s := range realEvents {
		var e responsesEvent
		require.True(t, quickEvent([]byte(s), &e), "%s", s)
		var want responsesEvent
		require.NoError(t, json.Unmarshal([]byte(s), &want))
		require.True(t, reflect.DeepEqual(want, e), "%s\nquick %+v\nfull  %+v", s, e, want)
	}
}

// Anything the full decode could read differently, or reject, is left to
// it.
func TestQuickEventDefers(t *testing.T) {
	for _, s := range []string{
		`{"type":"response.output_text.delta","item_id":"m","delta":"x"}`,               // not one of its types
		`{"type":"response.output_item.done","Type":"error","item":{"type":"message"}}`, // a key in another case
		`{"type":"response.output_item.done","type":"response.output_item.done","item":{}}`,
		`{"typ\u0065":"response.output_item.done","item":{}}`,
		`{"type":"response.output_item.d\u006fne","item":{}}`,
		`{"type":"response.output_item.done","item":null}`,
		`{"type":"response.output_item.done","item":{},"delta":5}`,
		`{"type":"response.output_item.done","item":{},"response":{}}`,
		`{"type":"response.output_item.done","item":{},"item":{}}`,
		`{"type":"response.completed","response":{"id":"r","error":{"message":"m"}}}`,
		`{"type":"response.completed","response":{"id":"r","incomplete_details":{"reason":"x"}}}`,
		`{"type":"response.completed","response":{"id":"r","usage":{"input_tokens":"many"}}}`,
		`{"type":"response.completed","response":{"id":"r","usage":7}}`,
		`{"type":"response.completed","response":{"id":"r\u0031"}}`,
		`{"type":"response.completed","response":{"id":"résumé"}}`,
		`{"type":"response.completed","response":{"id":5}}`,
		`{"type":"response.completed","response":{"ID":"r"}}`,
		`{"type":"response.completed","response":{"id":"r","id":"s"}}`,
		`{"type":"response.completed","response":null}`,
		`{"type":"response.completed","response":{"id":"r"}} x`,
		`{"type":"response.completed","response":{"id":"r"}`,
		// encoding/json folds case with Unicode rules: "ſ" matches "s".
		`{"type":"response.completed","response":{"id":"a","uſage":{"input_tokens":5}}}`,
		`{"type":"response.completed","response":{"id":"a"},"reſponse":{"id":"b"}}`,
		`{"type":"response.completed","response":{"id":"a","incomplete_detailſ":{"reason":"x"}}}`,
		`{"type":"response.output_item.done","item":{"type":"message"},"meſſage":"x"}`,
	} {
		var e responsesEvent
		require.False(t, quickEvent([]byte(s), &e), "%s", s)
	}
}

// Where quickEvent decodes an event, it decodes it as encoding/json does.
func FuzzQuickEvent(f *testing.F) {
	for _, s := range realEvents {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"type":"response.completed","response":{"id":null,"usage":null,"error":null}}`))
	f.Add([]byte(`{"type":"response.output_item.added","item":{"type":"x"},"ITEM_ID":1}`))
	f.Add([]byte(`{"type":"response.completed","response":{"id":"a","uſage":{"input_tokens":5}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var quick responsesEvent
		if !quickEvent(data, &quick) {
			return
		}
		var full responsesEvent
		if err := json.Unmarshal(data, &full); err != nil {
			t.Fatalf("quickEvent decoded %q, which encoding/json rejects: %v", data, err)
		}
		if !reflect.DeepEqual(quick, full) {
			t.Fatalf("%q:\nquick %+v\nfull  %+v", data, quick, full)
		}
	})
}

// BenchmarkResponsesEvent handles the events of a response that calls a
// tool and of one that answers in text: handle (quickEvent where it
// applies) against the full decode alone.
func BenchmarkResponsesEvent(b *testing.B) {
	events := make([][]byte, len(realEvents))
	for i, s := range realEvents {
		events[i] = []byte(s)
	}
	for _, bc := range []struct {
		name string
		fn   func(*responsesHandler, []byte) (bool, error)
	}{
		{"handle", (*responsesHandler).handle},
		{"decode", (*responsesHandler).decode},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := &responsesHandler{emit: emitter(nil)}
			b.ReportAllocs()
			for b.Loop() {
				h.res = Result{}
				for _, ev := range events {
					if _, err := bc.fn(h, ev); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// checkQuickToolCall requires quickToolCall to decode only what
// InputItem.UnmarshalJSON decodes, to the same item.
func checkQuickToolCall(t *testing.T, data []byte) bool {
	t.Helper()
	var quick InputItem
	if !quickToolCall(data, &quick) {
		return false
	}
	var full InputItem
	require.NoError(t, json.Unmarshal(data, &full), "quick path took %s", data)
	require.True(t, reflect.DeepEqual(full, quick), "%s\nquick %+v\nfull  %+v", data, quick, full)
	return true
}

func TestQuickToolCall(t *testing.T) {
	for _, s := range []string{
		`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"lookup","arguments":"","status":"in_progress"}`,
		`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"lookup","arguments":"{\"city\":\"Zürich \\u00e9\"}","status":"completed"}`,
		`{"type":"custom_tool_call","id":"ctc_1","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch\n","status":"completed"}`,
		`{"type":"function_call","call_id":"c","name":"n"}`,
		`{"type":"function_call","call_id":"c","namespace":"mcp__docs__","name":"search","arguments":"{}"}`,
		"{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"n\xff\",\"arguments\":\"\\ud800 \\udc00\\ud83d\"}",
	} {
		require.True(t, checkQuickToolCall(t, []byte(s)), "%s", s)
	}
	for _, s := range []string{
		`{"type":"message","role":"assistant","content":[]}`,
		`{"type":"reasoning","summary":[]}`,
		`{"type":"function_call","call_id":null,"name":"n","arguments":"{}"}`,
		`{"type":"function_call","call_id":"c","name":"n","arguments":{}}`,
		`{"type":"function_call","call_id":"c","name":"n","arguments":"{}","input":"x"}`,
		`{"type":"function_call","call_id":"c","name":"n","arguments":"{}","output":5}`,
		`{"type":"custom_tool_call","call_id":"c","name":"n","input":"x","arguments":"{}"}`,
		`{"type":"custom_tool_call","call_id":"c","namespace":"ns","name":"n","input":"x"}`,
		`{"type":"function_call","call_id":"c","namespace":null,"name":"n","arguments":"{}"}`,
		`{"type":"function_call","Name":"n","arguments":"{}"}`,
		`{"type":"function_call","name":"n","name":"m"}`,
		`{"type":"function_c\u0061ll","name":"n"}`,
		`{"type":"function_call","nαme":"n"}`,
		`{"type":"function_call","name":"n"`,
		`null`,
	} {
		require.False(t, checkQuickToolCall(t, []byte(s)), "%s", s)
	}
}

// A namespaced function call keeps its namespace through decoding and
// goes back upstream with it.
func TestFunctionCallNamespace(t *testing.T) {
	raw := `{"type":"function_call","id":"fc_1","call_id":"c","namespace":"mcp__docs__","name":"search","arguments":"{}"}`
	var quick, full InputItem
	require.True(t, quickToolCall([]byte(raw), &quick))
	require.NoError(t, json.Unmarshal([]byte(raw), &full))
	for _, it := range []InputItem{quick, full} {
		require.Equal(t, "mcp__docs__", it.Namespace)
		require.Equal(t, "search", it.Name)
	}
	out, err := json.Marshal(full)
	require.NoError(t, err)
	require.JSONEq(t, raw, string(out))
	plain, err := json.Marshal(InputItem{Type: ItemFunctionCall, CallID: "c", Name: "n", Arguments: "{}"})
	require.NoError(t, err)
	require.NotContains(t, string(plain), "namespace")
}

func FuzzQuickToolCall(f *testing.F) {
	f.Add([]byte(`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"lookup","arguments":"{\"a\":1}","status":"completed"}`))
	f.Add([]byte("{\"type\":\"custom_tool_call\",\"call_id\":\"c\",\"name\":\"n\",\"input\":\"\\ud800 \xff\"}"))
	f.Add([]byte(`{"type":"function_call","call_id":"c","name":"n","ſummary":[],"role":"user"}`))
	f.Fuzz(func(t *testing.T, data []byte) { checkQuickToolCall(t, data) })
}
