package model_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/model"
)

func TestInputItemJSONRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		item model.InputItem
		json string
	}{
		{"user message", model.UserMessage("hi <there>"),
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"hi <there>"}]}`},
		{"assistant message with id", model.InputItem{Type: model.ItemMessage, ID: "msg_1", Role: model.RoleAssistant, Content: []model.ContentPart{{Type: model.PartOutputText, Text: ""}}},
			`{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":""}]}`},
		{"image", model.InputItem{Type: model.ItemMessage, Role: model.RoleUser, Content: []model.ContentPart{{Type: model.PartInputImage, ImageURL: "https://x/y.png", Detail: "high"}}},
			`{"type":"message","role":"user","content":[{"type":"input_image","image_url":"https://x/y.png","detail":"high"}]}`},
		{"reasoning", model.InputItem{Type: model.ItemReasoning, ID: "rs_1", Summary: []model.ContentPart{{Type: model.PartSummaryText, Text: "s"}}, EncryptedContent: "enc"},
			`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"s"}],"encrypted_content":"enc"}`},
		{"reasoning without summary", model.InputItem{Type: model.ItemReasoning, Summary: []model.ContentPart{}, Content: []model.ContentPart{{Type: model.PartReasoningText, Text: "r"}}},
			`{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"r"}]}`},
		{"function call with empty arguments", model.InputItem{Type: model.ItemFunctionCall, ID: "fc_1", CallID: "call_1", Name: "f", Arguments: ""},
			`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":""}`},
		{"custom call", model.InputItem{Type: model.ItemCustomToolCall, CallID: "call_2", Name: "apply_patch", Input: "*** Begin Patch"},
			`{"type":"custom_tool_call","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch"}`},
		{"string output", model.FunctionCallOutput("call_1", ""),
			`{"type":"function_call_output","call_id":"call_1","output":""}`},
		{"content output", model.InputItem{Type: model.ItemFunctionCallOutput, CallID: "call_1", Output: model.ToolOutput{Content: []model.ContentPart{{Type: model.PartInputText, Text: "a"}}}},
			`{"type":"function_call_output","call_id":"call_1","output":[{"type":"input_text","text":"a"}]}`},
		{"custom output", model.CustomToolCallOutput("call_2", "ok"),
			`{"type":"custom_tool_call_output","call_id":"call_2","output":"ok"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.item)
			require.NoError(t, err)
			assert.JSONEq(t, tc.json, string(b))
			var back model.InputItem
			require.NoError(t, json.Unmarshal(b, &back))
			assert.Equal(t, tc.item, back)
		})
	}
}

func TestInputItemKeepsUnknownTypes(t *testing.T) {
	raw := `{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"go"}}`
	var it model.InputItem
	require.NoError(t, json.Unmarshal([]byte(raw), &it))
	assert.Equal(t, "web_search_call", it.Type)
	assert.Equal(t, "ws_1", it.ID)
	b, err := json.Marshal(it)
	require.NoError(t, err)
	assert.JSONEq(t, raw, string(b))
}

func TestInputItemEasyMessageForm(t *testing.T) {
	var it model.InputItem
	require.NoError(t, json.Unmarshal([]byte(`{"role":"assistant","content":"hello"}`), &it))
	assert.Equal(t, model.AssistantMessage("hello"), it)
}

func TestToolOutputString(t *testing.T) {
	assert.Equal(t, "x", model.ToolOutput{Text: "x"}.String())
	out := model.ToolOutput{Content: []model.ContentPart{{Type: model.PartInputText, Text: "a"}, {Type: model.PartInputImage, ImageURL: "u"}, {Type: model.PartInputText, Text: "b"}}}
	assert.Equal(t, "a\nb", out.String())
}
