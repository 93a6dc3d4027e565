package registry

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResponseItemJSON(t *testing.T) {
	cases := []struct {
		name string
		item ResponseItem
		want string
	}{
		{"function text", ResponseItem{Type: FunctionCallOutput, CallID: "c", Output: TextOutput("done", true)},
			`{"type":"function_call_output","call_id":"c","output":"done"}`},
		{"function empty text", ResponseItem{Type: FunctionCallOutput, CallID: "c", Output: Output{}},
			`{"type":"function_call_output","call_id":"c","output":""}`},
		{"function content items", ResponseItem{Type: FunctionCallOutput, CallID: "c", Output: ContentOutput([]ContentItem{
			InputText("see image"), InputImage("data:image/png;base64,AAAA"), InputText(""),
		}, true)}, `{"type":"function_call_output","call_id":"c","output":[
			{"type":"input_text","text":"see image"},
			{"type":"input_image","image_url":"data:image/png;base64,AAAA"},
			{"type":"input_text","text":""}]}`},
		{"function empty content array", ResponseItem{Type: FunctionCallOutput, CallID: "c", Output: ContentOutput(nil, true)},
			`{"type":"function_call_output","call_id":"c","output":[]}`},
		{"custom text", ResponseItem{Type: CustomToolCallOutput, CallID: "p", Output: TextOutput("Success.", false)},
			`{"type":"custom_tool_call_output","call_id":"p","output":"Success."}`},
		{"custom flattens content items", ResponseItem{Type: CustomToolCallOutput, CallID: "p", Output: ContentOutput([]ContentItem{
			InputText("a"), InputImage("data:x"), InputText("b"),
		}, true)}, `{"type":"custom_tool_call_output","call_id":"p","output":"a\nb"}`},
		{"tool search", ResponseItem{Type: ToolSearchOutput, CallID: "s", Output: Output{Tools: []ToolSpec{
			NamespaceSpec{Name: "mcp__t__", Tools: []FunctionSpec{{Name: "echo", DeferLoading: true}}},
		}}}, `{"type":"tool_search_output","call_id":"s","status":"completed","execution":"client","tools":[
			{"type":"namespace","name":"mcp__t__","description":"Tools in the mcp__t__ namespace.","tools":[
				{"type":"function","name":"echo","description":"","strict":false,"defer_loading":true,"parameters":{"type":"object","properties":{}}}]}]}`},
		{"tool search failed", ResponseItem{Type: ToolSearchOutput, CallID: "s", Output: TextOutput("query must not be empty", false)},
			`{"type":"tool_search_output","call_id":"s","status":"completed","execution":"client","tools":[]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.item)
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(b))
			assert.NotContains(t, string(b), "success", "success is internal metadata")
		})
	}

	_, err := json.Marshal(ResponseItem{Type: "bogus"})
	assert.Error(t, err)
	_, err = json.Marshal(ContentItem{Type: "input_audio"})
	assert.Error(t, err)
}

func TestContentItemRoundTrip(t *testing.T) {
	items := []ContentItem{InputText("t"), InputImage("data:image/png;base64,AA")}
	b, err := json.Marshal(items)
	require.NoError(t, err)
	var back []ContentItem
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, items, back)
	assert.Error(t, json.Unmarshal([]byte(`{"type":"input_audio"}`), &ContentItem{}))
}

func TestResponseItemForPayload(t *testing.T) {
	out := TextOutput("x", true)
	assert.Equal(t, FunctionCallOutput, responseItemFor(Call{Payload: FunctionPayload{}}, out).Type)
	assert.Equal(t, FunctionCallOutput, responseItemFor(Call{Payload: LocalShellPayload{}}, out).Type)
	assert.Equal(t, FunctionCallOutput, responseItemFor(Call{Payload: MCPPayload{}}, out).Type)
	assert.Equal(t, CustomToolCallOutput, responseItemFor(Call{Payload: CustomPayload{}}, out).Type)
	assert.Equal(t, ToolSearchOutput, responseItemFor(Call{Payload: ToolSearchPayload{}}, out).Type)
}

func TestMCPOutput(t *testing.T) {
	decode := func(s string) MCPCallToolResult {
		var r MCPCallToolResult
		require.NoError(t, json.Unmarshal([]byte(s), &r))
		return r
	}
	cases := []struct {
		name    string
		result  string
		want    string // JSON of the function_call_output "output" field
		success bool
	}{
		{"structured content wins", `{"content":[{"type":"text","text":"ignored"}],"structuredContent":{"b": 1, "a": [true]}}`,
			`"{\"b\":1,\"a\":[true]}"`, true},
		{"null structured content is ignored", `{"content":[{"type":"text","text":"hi"}],"structuredContent":null}`,
			`"[{\"type\":\"text\",\"text\":\"hi\"}]"`, true},
		{"text only is the content array as JSON text", `{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"isError":true}`,
			`"[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]"`, false},
		{"images become content items", `{"content":[{"type":"text","text":"cap"},{"type":"image","data":"QUJD","mimeType":"image/png"},{"type":"resource","resource":{"uri":"file:///a"}}],"isError":false}`,
			`[{"type":"input_text","text":"cap"},{"type":"input_image","image_url":"data:image/png;base64,QUJD"},{"type":"input_text","text":"{\"type\":\"resource\",\"resource\":{\"uri\":\"file:///a\"}}"}]`, true},
		{"no content", `{}`, `"[]"`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := MCPOutput(decode(tc.result))
			b, err := json.Marshal(ResponseItem{Type: FunctionCallOutput, CallID: "m", Output: out})
			require.NoError(t, err)
			var item struct {
				Output json.RawMessage `json:"output"`
			}
			require.NoError(t, json.Unmarshal(b, &item))
			assert.JSONEq(t, tc.want, string(item.Output))
			require.NotNil(t, out.Success)
			assert.Equal(t, tc.success, *out.Success)
		})
	}
}

func TestDecodeArguments(t *testing.T) {
	var v struct {
		A int `json:"a"`
	}
	require.NoError(t, DecodeArguments(`{"a":1,"extra":true}`, &v))
	assert.Equal(t, 1, v.A)
	err := DecodeArgumentsStrict(`{"a":1,"extra":true}`, &v)
	assert.EqualError(t, err, `failed to parse function arguments: json: unknown field "extra"`)
	err = DecodeArguments(`[`, &v)
	assert.EqualError(t, err, "failed to parse function arguments: unexpected EOF")
	assert.False(t, errors.Is(err, ErrFatal))
}

func TestFatalErrors(t *testing.T) {
	err := Fatalf("tool %s broke", "x")
	assert.ErrorIs(t, err, ErrFatal)
	assert.EqualError(t, err, "tool x broke")
	cause := errors.New("exit 2")
	hook := &HookAbortError{Hook: "h", Err: cause}
	assert.ErrorIs(t, hook, ErrFatal)
	assert.ErrorIs(t, hook, cause)
	assert.False(t, errors.Is(errors.New("plain"), ErrFatal))
}

func TestPreviewCutsOnRuneBoundary(t *testing.T) {
	s := ""
	for len(s) < previewLimit-1 {
		s += "a"
	}
	s += "é" // two bytes straddling the limit
	s += "tail"
	p := preview(s)
	assert.Equal(t, previewLimit-1, len(p))
	assert.Equal(t, "short", preview("short"))
}
