package model

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// EncodeItem gives the JSON of json.Marshal and WireJSON, for every kind of
// item and ids that need escaping.
func TestEncodeItemMatchesSeparateEncodings(t *testing.T) {
	var items []InputItem
	for _, id := range []string{"", "fc_1", `a"b\c`, "<&>", "é\u2028", "x,\"id\":\"y"} {
		items = append(items,
			InputItem{Type: ItemFunctionCall, ID: id, CallID: "c1", Name: "f", Arguments: `{"a":"<b>"}`},
			InputItem{Type: ItemCustomToolCall, ID: id, CallID: "c2", Name: "g", Input: "x"},
			InputItem{Type: ItemMessage, ID: id, Role: RoleAssistant, Content: []ContentPart{{Type: PartOutputText, Text: "hi & bye"}}},
			InputItem{Type: ItemReasoning, ID: id, Summary: []ContentPart{{Type: PartSummaryText, Text: "s"}}, EncryptedContent: "e"},
			InputItem{Type: ItemFunctionCallOutput, ID: id, CallID: "c1", Output: ToolOutput{Text: "ok"}},
			InputItem{Type: "web_search_call", ID: id, Raw: json.RawMessage(`{"type":"web_search_call","id":"ws_1","status":"completed"}`)},
		)
	}
	for _, it := range items {
		full, wire := EncodeItem(it)
		want, err := json.Marshal(it)
		require.NoError(t, err)
		wantWire, err := WireJSON(it)
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(full), "%+v", it)
		require.JSONEq(t, string(wantWire), string(wire), "%+v", it)
	}
	// Raw JSON that is not valid is not passed on.
	full, wire := EncodeItem(InputItem{Type: "other", Raw: json.RawMessage(`{"type":`)})
	require.Nil(t, full)
	require.Nil(t, wire)
}

// BenchmarkEncodeItem encodes a model's function call for the store and
// for upstream: at once, against json.Marshal and WireJSON.
func BenchmarkEncodeItem(b *testing.B) {
	it := InputItem{Type: ItemFunctionCall, ID: "fc_0123456789", CallID: "call_0123456789", Name: "lookup_weather", Arguments: `{"city":"Paris"}`}
	b.Run("EncodeItem", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			EncodeItem(it)
		}
	})
	b.Run("separate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(it)
			_, _ = WireJSON(it)
		}
	})
}
