package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The item types of InputItem.Type that the model layer understands. Items of
// any other type (web_search_call, local_shell_call, …) are kept verbatim in
// InputItem.Raw and replayed as they came.
const (
	ItemMessage              = "message"
	ItemReasoning            = "reasoning"
	ItemFunctionCall         = "function_call"
	ItemFunctionCallOutput   = "function_call_output"
	ItemCustomToolCall       = "custom_tool_call"
	ItemCustomToolCallOutput = "custom_tool_call_output"
	// ItemToolSearchCall is the model's call of the client-executed
	// tool_search tool; its arguments are a JSON object, not a string.
	ItemToolSearchCall = "tool_search_call"
	// ItemToolSearchOutput answers a tool_search_call with the tools it
	// loads.
	ItemToolSearchOutput = "tool_search_output"
)

// The content part types of ContentPart.Type.
const (
	PartInputText     = "input_text"
	PartOutputText    = "output_text"
	PartInputImage    = "input_image"
	PartSummaryText   = "summary_text"
	PartReasoningText = "reasoning_text"
)

// The message roles of InputItem.Role.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleSystem    = "system"
	RoleDeveloper = "developer"
)

// InputItem is one history item in the Responses API's shape, used both for
// what is sent to the model and for the output items it produces, so that
// history can be stored and replayed exactly. Which fields are meaningful
// depends on Type:
//
//   - message: Role, Content (input_text / output_text / input_image parts)
//   - reasoning: Summary (summary_text parts), Content (reasoning_text
//     parts), EncryptedContent
//   - function_call: CallID, Name, Arguments (raw JSON text), Namespace
//     when the model called a tool of a namespace
//   - custom_tool_call: CallID, Name, Input (raw text)
//   - function_call_output, custom_tool_call_output: CallID, Output
//   - tool_search_call: CallID, Arguments (the raw JSON object), and Raw,
//     which is what is replayed
//   - tool_search_output: CallID and Raw
//
// ID is the upstream item id (msg_…, rs_…, fc_…); it is stored but not sent
// back upstream, as requests are made with store=false. Items of other types
// keep their original JSON in Raw.
type InputItem struct {
	// Type is the item type, one of the Item… constants or any other
	// upstream type (then Raw holds the item).
	Type string
	// ID is the upstream output item id, empty for items we created.
	ID string
	// Role is the message role, one of the Role… constants.
	Role string
	// Content holds message parts, or reasoning_text parts of a reasoning
	// item.
	Content []ContentPart
	// CallID ties a tool call to its output.
	CallID string
	// Name is the called tool's name.
	Name string
	// Namespace is the namespace of a function call's tool ("mcp__docs__"
	// with Name "search"); "" for a top-level tool.
	Namespace string
	// Arguments is a function call's raw JSON argument text, or a
	// tool_search_call's arguments object.
	Arguments string
	// Input is a custom (freeform) tool call's raw input text.
	Input string
	// Output is a tool call output's body.
	Output ToolOutput
	// Summary holds a reasoning item's summary_text parts.
	Summary []ContentPart
	// EncryptedContent is a reasoning item's opaque encrypted content, to
	// be sent back verbatim.
	EncryptedContent string
	// Raw is the original JSON of an item whose Type this package does not
	// model; it is marshalled verbatim.
	Raw json.RawMessage
}

// ContentPart is one part of a message, reasoning summary or reasoning
// content.
type ContentPart struct {
	// Type is one of the Part… constants.
	Type string `json:"type"`
	// Text is the text of a text part.
	Text string `json:"text,omitempty"`
	// ImageURL is an input_image's URL (https: or data:).
	ImageURL string `json:"image_url,omitempty"`
	// Detail is an input_image's optional detail level.
	Detail string `json:"detail,omitempty"`
}

// ToolOutput is the body of a function_call_output or
// custom_tool_call_output: a string, or (when Content is not nil) an array of
// input_text / input_image content items.
type ToolOutput struct {
	// Text is the output when it is a plain string.
	Text string
	// Content, when not nil, is the output as content items; Text is then
	// ignored.
	Content []ContentPart
}

// UserMessage returns a user message item holding one input_text part.
func UserMessage(text string) InputItem {
	return InputItem{Type: ItemMessage, Role: RoleUser, Content: []ContentPart{{Type: PartInputText, Text: text}}}
}

// AssistantMessage returns an assistant message item holding one
// output_text part.
func AssistantMessage(text string) InputItem {
	return InputItem{Type: ItemMessage, Role: RoleAssistant, Content: []ContentPart{{Type: PartOutputText, Text: text}}}
}

// FunctionCallOutput returns the function_call_output item answering callID
// with a string output.
func FunctionCallOutput(callID, output string) InputItem {
	return InputItem{Type: ItemFunctionCallOutput, CallID: callID, Output: ToolOutput{Text: output}}
}

// CustomToolCallOutput returns the custom_tool_call_output item answering
// callID.
func CustomToolCallOutput(callID, output string) InputItem {
	return InputItem{Type: ItemCustomToolCallOutput, CallID: callID, Output: ToolOutput{Text: output}}
}

// Text returns the concatenated text parts of a message or of a reasoning
// item's content.
func (it InputItem) Text() string {
	return joinText(it.Content, "")
}

// String returns the output as text: Text, or the input_text items joined by
// newlines when the output is an array.
func (o ToolOutput) String() string {
	if o.Content == nil {
		return o.Text
	}
	return joinText(o.Content, "\n")
}

func joinText(parts []ContentPart, sep string) string {
	var texts []string
	for _, p := range parts {
		if p.Type != PartInputImage {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, sep)
}

// MarshalJSON encodes the output as a JSON string or content array.
func (o ToolOutput) MarshalJSON() ([]byte, error) {
	if o.Content != nil {
		return marshal(o.Content)
	}
	return marshal(o.Text)
}

// UnmarshalJSON accepts a JSON string, a content array or null.
func (o *ToolOutput) UnmarshalJSON(b []byte) error {
	*o = ToolOutput{}
	switch t := bytes.TrimSpace(b); {
	case len(t) == 0 || bytes.Equal(t, []byte("null")):
		return nil
	case t[0] == '[':
		o.Content = []ContentPart{}
		return json.Unmarshal(t, &o.Content)
	default:
		return json.Unmarshal(t, &o.Text)
	}
}

// MarshalJSON encodes the part in the Responses API shape: text parts always
// carry "text", images carry "image_url" and an optional "detail".
func (p ContentPart) MarshalJSON() ([]byte, error) {
	if p.Type == PartInputImage {
		return marshal(struct {
			Type     string `json:"type"`
			ImageURL string `json:"image_url"`
			Detail   string `json:"detail,omitempty"`
		}{p.Type, p.ImageURL, p.Detail})
	}
	return marshal(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{p.Type, p.Text})
}

// MarshalJSON encodes the item in the Responses API input shape, with exactly
// the fields its type defines.
func (it InputItem) MarshalJSON() ([]byte, error) {
	switch it.Type {
	case ItemMessage:
		return marshal(struct {
			Type    string        `json:"type"`
			ID      string        `json:"id,omitempty"`
			Role    string        `json:"role"`
			Content []ContentPart `json:"content"`
		}{it.Type, it.ID, it.Role, nonNil(it.Content)})
	case ItemReasoning:
		return marshal(struct {
			Type             string        `json:"type"`
			ID               string        `json:"id,omitempty"`
			Summary          []ContentPart `json:"summary"`
			Content          []ContentPart `json:"content,omitempty"`
			EncryptedContent string        `json:"encrypted_content,omitempty"`
		}{it.Type, it.ID, nonNil(it.Summary), it.Content, it.EncryptedContent})
	case ItemFunctionCall:
		return marshal(struct {
			Type      string `json:"type"`
			ID        string `json:"id,omitempty"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Namespace string `json:"namespace,omitempty"`
			Arguments string `json:"arguments"`
		}{it.Type, it.ID, it.CallID, it.Name, it.Namespace, it.Arguments})
	case ItemCustomToolCall:
		return marshal(struct {
			Type   string `json:"type"`
			ID     string `json:"id,omitempty"`
			CallID string `json:"call_id"`
			Name   string `json:"name"`
			Input  string `json:"input"`
		}{it.Type, it.ID, it.CallID, it.Name, it.Input})
	case ItemFunctionCallOutput, ItemCustomToolCallOutput:
		return marshal(struct {
			Type   string     `json:"type"`
			CallID string     `json:"call_id"`
			Output ToolOutput `json:"output"`
		}{it.Type, it.CallID, it.Output})
	}
	if len(it.Raw) == 0 {
		return nil, fmt.Errorf("model: item of type %q has no raw JSON to encode", it.Type)
	}
	return it.Raw, nil
}

// UnmarshalJSON decodes a Responses API item. A message may omit "type" and
// may carry its content as a plain string; unknown types are kept in Raw.
func (it *InputItem) UnmarshalJSON(b []byte) error {
	var w struct {
		Type             string          `json:"type"`
		ID               string          `json:"id"`
		Role             string          `json:"role"`
		Content          json.RawMessage `json:"content"`
		CallID           string          `json:"call_id"`
		Name             string          `json:"name"`
		Namespace        string          `json:"namespace"`
		Arguments        json.RawMessage `json:"arguments"`
		Input            string          `json:"input"`
		Output           ToolOutput      `json:"output"`
		Summary          []ContentPart   `json:"summary"`
		EncryptedContent *string         `json:"encrypted_content"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Type == "" && w.Role != "" {
		w.Type = ItemMessage
	}
	*it = InputItem{Type: w.Type, ID: w.ID}
	switch w.Type {
	case ItemMessage, ItemReasoning:
		content, err := decodeContent(w.Content, w.Role)
		if err != nil {
			return fmt.Errorf("model: %s content: %w", w.Type, err)
		}
		it.Content = content
		if w.Type == ItemMessage {
			it.Role = w.Role
		} else {
			it.Summary = nonNil(w.Summary)
			if w.EncryptedContent != nil {
				it.EncryptedContent = *w.EncryptedContent
			}
		}
	case ItemFunctionCall:
		it.CallID, it.Name, it.Namespace = w.CallID, w.Name, w.Namespace
		if len(w.Arguments) > 0 {
			if err := json.Unmarshal(w.Arguments, &it.Arguments); err != nil {
				return fmt.Errorf("model: function_call arguments: %w", err)
			}
		}
	case ItemCustomToolCall:
		it.CallID, it.Name, it.Input = w.CallID, w.Name, w.Input
	case ItemFunctionCallOutput, ItemCustomToolCallOutput:
		it.CallID, it.Output = w.CallID, w.Output
	case ItemToolSearchCall, ItemToolSearchOutput:
		// Kept verbatim for replay; the call id pairs them, and the
		// arguments object is what the search reads.
		it.CallID = w.CallID
		if w.Type == ItemToolSearchCall && len(w.Arguments) > 0 && !bytes.Equal(w.Arguments, []byte("null")) {
			it.Arguments = string(w.Arguments)
		}
		it.Raw = append(json.RawMessage(nil), b...)
	default:
		it.Raw = append(json.RawMessage(nil), b...)
	}
	return nil
}

// decodeContent reads a content array, or a plain string (the "easy" message
// form), which becomes one text part of the type the role implies.
func decodeContent(raw json.RawMessage, role string) ([]ContentPart, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil, nil
	}
	if t[0] == '"' {
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			return nil, err
		}
		typ := PartInputText
		if role == RoleAssistant {
			typ = PartOutputText
		}
		return []ContentPart{{Type: typ, Text: s}}, nil
	}
	var parts []ContentPart
	if err := json.Unmarshal(t, &parts); err != nil {
		return nil, err
	}
	return parts, nil
}

// EncodeItem returns the item's full encoding (what a store keeps: the
// JSON of json.Marshal, without its HTML escaping) and its upstream one
// (WireJSON); either is nil if it cannot be made. It encodes a modelled
// item once: the two differ only by the item's id, which MarshalJSON
// writes right after its type.
func EncodeItem(it InputItem) (full, wire json.RawMessage) {
	if it.Raw != nil && !isModelled(it.Type) {
		full, _ = json.Marshal(it) // validates Raw
		wire, _ = wireItem(it)
		return full, wire
	}
	full, err := it.MarshalJSON()
	if err != nil {
		return nil, nil
	}
	if it.ID == "" {
		return full, full
	}
	typ, err1 := marshal(it.Type)
	id, err2 := marshal(it.ID)
	head := `{"type":` + string(typ)
	withID := head + `,"id":` + string(id)
	if n := len(withID); err1 == nil && err2 == nil && len(full) > n && string(full[:n]) == withID && (full[n] == ',' || full[n] == '}') {
		wire = make(json.RawMessage, 0, len(full)-n+len(head))
		return full, append(append(wire, head...), full[n:]...)
	}
	wire, _ = wireItem(it)
	return full, wire
}

// WireJSON returns the item as the Responses client sends it upstream
// (compact JSON, without the item's id): what Request.InputWire holds.
func WireJSON(it InputItem) (json.RawMessage, error) { return wireItem(it) }

// wireItem returns the item as sent upstream: without its id, because
// requests use store=false and upstream cannot resolve ids of items it did
// not persist.
func wireItem(it InputItem) (json.RawMessage, error) {
	if it.Raw == nil || isModelled(it.Type) {
		it.ID = ""
		return it.MarshalJSON()
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(it.Raw, &fields); err != nil {
		return nil, fmt.Errorf("model: item of type %q: %w", it.Type, err)
	}
	delete(fields, "id")
	return marshal(fields)
}

func isModelled(typ string) bool {
	switch typ {
	case ItemMessage, ItemReasoning, ItemFunctionCall, ItemFunctionCallOutput, ItemCustomToolCall, ItemCustomToolCallOutput:
		return true
	}
	return false
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
