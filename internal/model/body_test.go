package model

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// buildResponsesBody is appendResponsesBody into a fresh buffer.
func buildResponsesBody(req Request) ([]byte, error) {
	var b bytes.Buffer
	if err := appendResponsesBody(&b, req); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// referenceRequest is the request body as encoding/json writes it from a
// struct: buildResponsesBody must produce exactly these bytes.
type referenceRequest struct {
	Model             string            `json:"model"`
	Instructions      string            `json:"instructions,omitempty"`
	Input             []json.RawMessage `json:"input"`
	Tools             []json.RawMessage `json:"tools"`
	ToolChoice        string            `json:"tool_choice"`
	ParallelToolCalls bool              `json:"parallel_tool_calls"`
	Reasoning         *reasoningParam   `json:"reasoning,omitempty"`
	Store             bool              `json:"store"`
	Stream            bool              `json:"stream"`
	Include           []string          `json:"include"`
	ServiceTier       string            `json:"service_tier,omitempty"`
	Text              *textParam        `json:"text,omitempty"`
}

func referenceBody(t *testing.T, req Request) []byte {
	t.Helper()
	body := referenceRequest{Model: req.Model, Instructions: req.Instructions, Input: []json.RawMessage{}, Tools: nonNil(req.Tools),
		ToolChoice: "auto", ParallelToolCalls: req.ParallelToolCalls, Stream: true, Include: []string{}, ServiceTier: req.ServiceTier}
	for _, it := range req.Input {
		raw, err := wireItem(it)
		require.NoError(t, err)
		body.Input = append(body.Input, raw)
	}
	summary := req.ReasoningSummary
	if summary == "none" {
		summary = ""
	}
	if req.ReasoningEffort != "" || summary != "" {
		body.Reasoning = &reasoningParam{Effort: req.ReasoningEffort, Summary: summary}
		body.Include = append(body.Include, "reasoning.encrypted_content")
	}
	if len(req.OutputSchema) > 0 || req.Verbosity != "" {
		body.Text = &textParam{Verbosity: req.Verbosity}
		if len(req.OutputSchema) > 0 {
			body.Text.Format = &textFormat{Type: "json_schema", Name: outputSchemaName, Schema: req.OutputSchema, Strict: true}
		}
	}
	out, err := marshal(body)
	require.NoError(t, err)
	return out
}

func TestResponsesBodyMatchesStructEncoding(t *testing.T) {
	history := []InputItem{
		{Type: ItemMessage, Role: RoleDeveloper, Content: []ContentPart{{Type: PartInputText, Text: "be <brief> & exact"}}},
		UserMessage("héllo \u2028 \"quoted\" 🌍"),
		{Type: ItemReasoning, ID: "rs_1", Summary: []ContentPart{{Type: PartSummaryText, Text: "thinking"}}, EncryptedContent: "enc"},
		{Type: ItemFunctionCall, ID: "fc_1", CallID: "call_1", Name: "lookup", Arguments: `{"city":"Paris"}`},
		{Type: ItemFunctionCallOutput, CallID: "call_1", Output: ToolOutput{Content: []ContentPart{{Type: PartInputText, Text: "sunny"}, {Type: PartInputImage, ImageURL: "data:image/png;base64,AAAA"}}}},
		{Type: "web_search_call", ID: "ws_1", Raw: json.RawMessage(`{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"q"}}`)},
		{Type: ItemCustomToolCall, ID: "ctc_1", CallID: "call_2", Name: "apply_patch", Input: "*** Begin Patch\n*** End Patch"},
		CustomToolCallOutput("call_2", "done"),
		AssistantMessage("bye"),
	}
	tools := []json.RawMessage{json.RawMessage(`{"type":"function","name":"lookup","description":"a \u003ctool\u003e","strict":false,"parameters":{"type":"object","properties":{}}}`), json.RawMessage(`{"type":"web_search"}`)}
	reqs := map[string]Request{
		"minimal":              {Model: "m"},
		"full":                 {Model: "gpt-x", Instructions: "sys <prompt>", Input: history, Tools: tools, ParallelToolCalls: true, ReasoningEffort: "high", ReasoningSummary: "auto", OutputSchema: json.RawMessage(`{"type":"object"}`)},
		"summary":              {Model: "m", Input: history[:2], ReasoningSummary: "none"},
		"summary 2":            {Model: "m", Input: history[:2], ReasoningSummary: "detailed"},
		"tier":                 {Model: "m", Input: history[:2], ServiceTier: "priority", OutputSchema: json.RawMessage(`{"type":"object"}`)},
		"verbosity":            {Model: "m", Input: history[:2], Verbosity: "high"},
		"verbosity and schema": {Model: "m", Input: history[:2], Verbosity: "low", OutputSchema: json.RawMessage(`{"type":"object"}`)},
	}
	for name, req := range reqs {
		want := referenceBody(t, req)
		got, err := buildResponsesBody(req)
		require.NoError(t, err, name)
		require.Equal(t, string(want), string(got), name)
		require.True(t, json.Valid(got), name)

		// Pre-encoded items give the same bytes.
		req.InputWire = make([]json.RawMessage, len(req.Input))
		for i, it := range req.Input {
			req.InputWire[i], err = WireJSON(it)
			require.NoError(t, err)
		}
		got, err = buildResponsesBody(req)
		require.NoError(t, err, name)
		require.Equal(t, string(want), string(got), name)
	}
}

func TestResponsesBodyRejectsBadParts(t *testing.T) {
	_, err := buildResponsesBody(Request{Model: "m", OutputSchema: json.RawMessage(`{`)})
	require.Error(t, err)
	verbose, err := buildResponsesBody(Request{Model: "m", Verbosity: "low"})
	require.NoError(t, err)
	require.Contains(t, string(verbose), `,"text":{"verbosity":"low"}}`)
	_, err = buildResponsesBody(Request{Model: "m", Tools: []json.RawMessage{nil}})
	require.Error(t, err)
	_, err = buildResponsesBody(Request{Model: "m", Input: []InputItem{{Type: "mystery"}}})
	require.Error(t, err)
	// A wire slice of the wrong length is ignored, not trusted.
	body, err := buildResponsesBody(Request{Model: "m", Input: []InputItem{UserMessage("x")}, InputWire: []json.RawMessage{json.RawMessage(`"bogus"`), json.RawMessage(`"bogus"`)}})
	require.NoError(t, err)
	require.NotContains(t, string(body), "bogus")
}
