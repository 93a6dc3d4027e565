package model

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name   string
		header http.Header
		want   time.Duration
		ok     bool
	}{
		{"none", http.Header{}, 0, false},
		{"seconds", http.Header{"Retry-After": {"3"}}, 3 * time.Second, true},
		{"fractional seconds", http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond, true},
		{"zero", http.Header{"Retry-After": {"0"}}, 0, true},
		{"milliseconds win", http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"3"}}, 250 * time.Millisecond, true},
		{"http date", http.Header{"Retry-After": {now.Add(10 * time.Second).Format(http.TimeFormat)}}, 10 * time.Second, true},
		{"date in the past", http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, 0, true},
		{"huge is clamped", http.Header{"Retry-After": {"1e300"}}, 24 * time.Hour, true},
		{"negative", http.Header{"Retry-After": {"-1"}}, 0, false},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseRetryAfter(tc.header, now)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseErrorBody(t *testing.T) {
	code, typ, msg := parseErrorBody([]byte(`{"error":{"message":"m","type":"t","code":"c","param":null}}`))
	assert.Equal(t, []string{"c", "t", "m"}, []string{code, typ, msg})
	code, _, msg = parseErrorBody([]byte(`{"error":{"message":"m","code":429}}`))
	assert.Equal(t, []string{"429", "m"}, []string{code, msg})
	_, _, msg = parseErrorBody([]byte(`{"error":"plain"}`))
	assert.Equal(t, "plain", msg)
	_, _, msg = parseErrorBody([]byte("  Bad Gateway\n"))
	assert.Equal(t, "Bad Gateway", msg)
}

func TestChatMessagesMergeAssistantTextAndCalls(t *testing.T) {
	msgs, err := chatMessages(Request{Input: []InputItem{
		{Type: ItemMessage, Role: RoleDeveloper, Content: []ContentPart{{Type: PartInputText, Text: "dev"}}},
		UserMessage("u1"),
		AssistantMessage(""),
		{Type: ItemFunctionCall, CallID: "c1", Name: "f", Arguments: "{}"},
		{Type: ItemReasoning, Summary: []ContentPart{}},
		{Type: ItemFunctionCall, CallID: "c2", Name: "f", Arguments: `{"a":1}`},
		FunctionCallOutput("c1", "o1"),
		FunctionCallOutput("c2", "o2"),
		{Type: ItemFunctionCall, CallID: "c3", Name: "f", Arguments: "{}"},
	}})
	require.NoError(t, err)
	b, err := json.Marshal(msgs)
	require.NoError(t, err)
	assert.JSONEq(t, `[
		{"role":"system","content":"dev"},
		{"role":"user","content":"u1"},
		{"role":"assistant","content":null,"tool_calls":[
			{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},
			{"id":"c2","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"o1"},
		{"role":"tool","tool_call_id":"c2","content":"o2"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c3","type":"function","function":{"name":"f","arguments":"{}"}}]}
	]`, string(b))
}

func TestChatToolCallWithoutIDGetsStableID(t *testing.T) {
	h := &chatHandler{emit: emitter(nil), custom: map[string]bool{}, calls: map[int]*chatCallAcc{}}
	for _, data := range []string{
		`{"id":"cmpl-9","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"x\""}}]}}]}`,
		`{"id":"cmpl-9","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]},"finish_reason":"tool_calls"}]}`,
	} {
		done, err := h.handle([]byte(data))
		require.NoError(t, err)
		require.False(t, done)
	}
	require.NoError(t, h.end(), "a stream with a finish_reason but no [DONE] is complete")
	require.Len(t, h.res.Items, 1)
	it := h.res.Items[0]
	assert.Equal(t, "call_cmpl-9_0", it.CallID)
	assert.Equal(t, `{"x":1}`, it.Arguments)
}

// FuzzResponsesEvent feeds arbitrary stream events to the Responses
// decoder: it may reject them, never panic.
func FuzzResponsesEvent(f *testing.F) {
	for _, s := range []string{
		`{"type":"response.output_text.delta","item_id":"msg_1","delta":"hi"}`,
		`{"type":"response.output_item.done","item":{"type":"function_call","call_id":"c","name":"n","arguments":"{}"}}`,
		`{"type":"response.output_item.done","item":{"type":"message","content":"x","role":"user"}}`,
		`{"type":"response.completed","response":{"id":"r","usage":{"input_tokens":1}}}`,
		`{"type":"response.failed","response":{"error":{"code":"x","message":"y"}}}`,
		`{"type":"error","code":5}`, `{"error":{}}`, `[]`, `null`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h := &responsesHandler{emit: emitter(nil)}
		_, _ = h.handle(data)
	})
}

// FuzzChatChunk feeds arbitrary chunks to the Chat Completions decoder.
func FuzzChatChunk(f *testing.F) {
	for _, s := range []string{
		`{"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":-1,"id":"x","function":{"name":"f","arguments":"{"}}]}}]}`,
		`{"choices":[],"usage":{"prompt_tokens":1}}`, `[DONE]`, `{"error":{"message":"m"}}`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h := &chatHandler{emit: emitter(nil), custom: map[string]bool{"f": true}, calls: map[int]*chatCallAcc{}}
		if done, err := h.handle(data); err == nil && !done {
			_ = h.end()
		}
	})
}

// FuzzInputItem checks that any item that decodes re-encodes to JSON that
// decodes to the same item.
func FuzzInputItem(f *testing.F) {
	for _, s := range []string{
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"a"}]}`,
		`{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"u"}]}`,
		`{"type":"reasoning","summary":[],"encrypted_content":"e"}`,
		`{"type":"web_search_call","id":"w"}`, `{"role":"user","content":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var it InputItem
		if json.Unmarshal(data, &it) != nil {
			return
		}
		b, err := json.Marshal(it)
		if err != nil {
			return // e.g. an unknown type whose raw form is not an object
		}
		var back InputItem
		require.NoError(t, json.Unmarshal(b, &back))
		b2, err := json.Marshal(back)
		require.NoError(t, err)
		require.JSONEq(t, string(b), string(b2))
	})
}

func TestLeadingType(t *testing.T) {
	for _, tc := range []struct {
		data, typ string
		ok        bool
	}{
		{`{"type":"response.output_text.delta","delta":"x"}`, "response.output_text.delta", true},
		{" {\n \"type\" : \"a.b\" }", "a.b", true},
		{`{"type":""}`, "", true},
		{`{"sequence_number":1,"type":"a"}`, "", false},
		{`{"type":"a\"b"}`, "", false},
		{`{"type":"a\u0062"}`, "", false},
		{`{"type":1}`, "", false},
		{`{"type":"unterminated`, "", false},
		{`{"types":"a"}`, "", false},
		{`{"type":"a","item":{"type":"b"}}`, "", false},
		{`{"type":"a","type":"error"}`, "", false},
		{`{"type":"a","TYPE":"error","message":"boom"}`, "", false},
		{`{"type":"a","typ\u0065":"error"}`, "", false},
		{`{"type":"a","delta":"a \"type\" word"}`, "a", true}, // not a key
		{`{"type":"a","delta":"types"}`, "a", true},
		{`[]`, "", false},
		{``, "", false},
	} {
		typ, ok := leadingType([]byte(tc.data))
		assert.Equal(t, tc.ok, ok, "%s", tc.data)
		assert.Equal(t, tc.typ, string(typ), "%s", tc.data)
	}
}

// TestResponsesIgnoredEventsAreNotDecoded shows the fast path: an event we
// do not act on is skipped, while a malformed one is still an error.
func TestResponsesIgnoredEventsAreNotDecoded(t *testing.T) {
	var events []Event
	h := &responsesHandler{emit: emitter(func(ev Event) error { events = append(events, ev); return nil })}
	done, err := h.handle([]byte(`{"type":"response.function_call_arguments.delta","item_id":"fc_1","delta":"{\"a\""}`))
	require.NoError(t, err)
	assert.False(t, done)
	assert.Empty(t, events)
	_, err = h.handle([]byte(`{"type":"response.in_progress","response":{`))
	var me *Error
	require.ErrorAs(t, err, &me)
	assert.Equal(t, KindMalformed, me.Kind)
}

// FuzzResponsesFastPath checks that skipping an event without decoding it
// is only done where decoding it would have had no effect.
func FuzzResponsesFastPath(f *testing.F) {
	for _, s := range []string{
		`{"type":"response.function_call_arguments.delta","item_id":"fc","delta":"x"}`,
		`{"type":"response.in_progress","response":{"id":"r"}}`,
		`{"type":"response.output_text.delta","item_id":"msg_1","delta":"hi"}`,
		`{"type":"response.completed","response":{"id":"r"}}`,
		`{"type":"x","type":"error"}`, `{"type":"x","error":{"message":"m"}}`, `{"type":"x"`,
		`{"type":"response.in_progress","TYPE":"error","message":"boom"}`, `{"type":"x","typ\u0065":"error"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		typ, ok := leadingType(data)
		if !ok || responsesHandled(typ) || !json.Valid(data) {
			return
		}
		var events []Event
		h := &responsesHandler{emit: emitter(func(ev Event) error { events = append(events, ev); return nil })}
		done, err := h.decode(data)
		if done || err != nil || len(events) > 0 || h.res.ResponseID != "" || len(h.res.Items) > 0 {
			t.Fatalf("the fast path would skip %q, but decoding it gives done=%v err=%v events=%v", data, done, err, events)
		}
	})
}
