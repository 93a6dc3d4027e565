package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// ContentItemType is the type tag of a function output content item.
type ContentItemType string

// The content item types a function output may carry (docs/tools.md §1.9).
const (
	// ContentInputText is a text content item.
	ContentInputText ContentItemType = "input_text"
	// ContentInputImage is an image content item referenced by URL (often a
	// data: URL).
	ContentInputImage ContentItemType = "input_image"
)

// ContentItem is one element of a content-item function output.
type ContentItem struct {
	// Type is input_text or input_image.
	Type ContentItemType
	// Text is the text of an input_text item.
	Text string
	// ImageURL is the URL of an input_image item.
	ImageURL string
}

// InputText returns an input_text content item.
func InputText(text string) ContentItem { return ContentItem{Type: ContentInputText, Text: text} }

// InputImage returns an input_image content item.
func InputImage(url string) ContentItem { return ContentItem{Type: ContentInputImage, ImageURL: url} }

// MarshalJSON encodes the item as {"type":"input_text","text"} or
// {"type":"input_image","image_url"}.
func (c ContentItem) MarshalJSON() ([]byte, error) {
	switch c.Type {
	case ContentInputText:
		return json.Marshal(struct {
			Type ContentItemType `json:"type"`
			Text string          `json:"text"`
		}{c.Type, c.Text})
	case ContentInputImage:
		return json.Marshal(struct {
			Type     ContentItemType `json:"type"`
			ImageURL string          `json:"image_url"`
		}{c.Type, c.ImageURL})
	default:
		return nil, fmt.Errorf("registry: unknown content item type %q", c.Type)
	}
}

// UnmarshalJSON decodes an item encoded by MarshalJSON.
func (c *ContentItem) UnmarshalJSON(data []byte) error {
	var w struct {
		Type     ContentItemType `json:"type"`
		Text     string          `json:"text"`
		ImageURL string          `json:"image_url"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	switch w.Type {
	case ContentInputText, ContentInputImage:
	default:
		return fmt.Errorf("registry: unknown content item type %q", w.Type)
	}
	*c = ContentItem(w)
	return nil
}

// Output is what a handler returns: the body sent to the model plus the
// success flag, which is internal metadata (logging, events, hooks, UI) and
// never serialized to the model.
type Output struct {
	// Text is the body when Content is nil.
	Text string
	// Content, when non-nil, is the body as an array of content items.
	Content []ContentItem
	// Success is true, false, or nil when unknown.
	Success *bool
	// Tools are the tools a tool_search call loads; only a
	// tool_search_output carries them (Text and Content are then not
	// sent).
	Tools []ToolSpec
}

// TextOutput returns a text output with the given success flag.
func TextOutput(text string, success bool) Output {
	return Output{Text: text, Success: &success}
}

// ContentOutput returns a content-item output with the given success flag.
func ContentOutput(items []ContentItem, success bool) Output {
	if items == nil {
		items = []ContentItem{}
	}
	return Output{Content: items, Success: &success}
}

// failureOutput is the output of a respond-to-model error.
func failureOutput(text string) Output { return TextOutput(text, false) }

// Succeeded reports whether Success is set and true.
func (o Output) Succeeded() bool { return o.Success != nil && *o.Success }

// PlainText returns the body as text: Text, or the text items of Content
// joined by newlines (images are skipped).
func (o Output) PlainText() string {
	if o.Content == nil {
		return o.Text
	}
	var parts []string
	for _, it := range o.Content {
		if it.Type == ContentInputText {
			parts = append(parts, it.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ResponseItemType is the type tag of an output item sent to the model.
type ResponseItemType string

// The output item types (docs/tools.md §1.9).
const (
	// FunctionCallOutput answers function, local_shell and MCP calls.
	FunctionCallOutput ResponseItemType = "function_call_output"
	// CustomToolCallOutput answers custom (freeform) calls.
	CustomToolCallOutput ResponseItemType = "custom_tool_call_output"
	// ToolSearchOutput answers tool_search calls with the tools found.
	ToolSearchOutput ResponseItemType = "tool_search_output"
)

// ResponseItem is the output item for one call, ready to append to the
// model history. The model client layer converts it for its wire (Responses
// items or Chat Completions tool messages).
type ResponseItem struct {
	// Type is function_call_output or custom_tool_call_output.
	Type ResponseItemType
	// CallID pairs the output with its call.
	CallID string
	// Output is the body and the success flag.
	Output Output
}

// MarshalJSON encodes the Responses API item: {"type","call_id","output"},
// where output is a string or, for function outputs with content items, an
// array. Success is not serialized. Custom outputs are always a string. A
// tool_search_output is {"type","call_id","status":"completed",
// "execution":"client","tools":[...]}, as the reference answers every
// client-executed search, a failed one with no tools.
func (r ResponseItem) MarshalJSON() ([]byte, error) {
	var out any = r.Output.Text
	switch r.Type {
	case ToolSearchOutput:
		tools := r.Output.Tools
		if tools == nil {
			tools = []ToolSpec{}
		}
		return json.Marshal(struct {
			Type      ResponseItemType `json:"type"`
			CallID    string           `json:"call_id"`
			Status    string           `json:"status"`
			Execution string           `json:"execution"`
			Tools     []ToolSpec       `json:"tools"`
		}{r.Type, r.CallID, "completed", "client", tools})
	case FunctionCallOutput:
		if r.Output.Content != nil {
			out = r.Output.Content
		}
	case CustomToolCallOutput:
		out = r.Output.PlainText()
	default:
		return nil, fmt.Errorf("registry: unknown response item type %q", r.Type)
	}
	return json.Marshal(struct {
		Type   ResponseItemType `json:"type"`
		CallID string           `json:"call_id"`
		Output any              `json:"output"`
	}{r.Type, r.CallID, out})
}

// responseItemFor builds the output item for a call from its payload kind.
func responseItemFor(c Call, out Output) ResponseItem {
	t := FunctionCallOutput
	if c.Payload != nil {
		switch c.Payload.Kind() {
		case PayloadCustom:
			t = CustomToolCallOutput
		case PayloadToolSearch:
			t = ToolSearchOutput
		}
	}
	return ResponseItem{Type: t, CallID: c.CallID, Output: out}
}

// MCPCallToolResult is the part of an MCP CallToolResult that shapes the
// model output.
type MCPCallToolResult struct {
	// Content is the raw content blocks.
	Content []json.RawMessage `json:"content"`
	// StructuredContent is the raw structured result, if any.
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	// IsError marks a tool-level failure.
	IsError *bool `json:"isError,omitempty"`
}

// MCPOutput converts an MCP tool result to the model output (docs/tools.md
// §1.9): non-null structuredContent → its JSON as text; else, if any block is
// an image → content items (text → input_text, image → data URL input_image,
// other blocks → their JSON as input_text); else the JSON of the content
// array as text. Success is !isError.
func MCPOutput(res MCPCallToolResult) Output {
	success := res.IsError == nil || !*res.IsError
	if sc := bytes.TrimSpace(res.StructuredContent); len(sc) > 0 && !bytes.Equal(sc, []byte("null")) {
		return TextOutput(compactJSON(sc), success)
	}
	for _, raw := range res.Content {
		var b struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &b) == nil && b.Type == "image" {
			return ContentOutput(MCPContentItems(res.Content), success)
		}
	}
	content := res.Content
	if content == nil {
		content = []json.RawMessage{}
	}
	b, err := json.Marshal(content)
	if err != nil {
		// Only invalid raw blocks get here; fall back to their text.
		parts := make([]string, len(content))
		for i, c := range content {
			parts[i] = string(c)
		}
		return TextOutput("["+strings.Join(parts, ",")+"]", success)
	}
	return TextOutput(string(b), success)
}

// MCPContentItems converts MCP content blocks to content items: text →
// input_text, image → data URL input_image, any other block → its JSON as
// input_text.
func MCPContentItems(content []json.RawMessage) []ContentItem {
	items := make([]ContentItem, 0, len(content))
	for _, raw := range content {
		// A block that does not decode keeps its zero value and is passed
		// through as JSON text.
		var b struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Data     string `json:"data"`
			MimeType string `json:"mimeType"`
		}
		_ = json.Unmarshal(raw, &b)
		switch b.Type {
		case "text":
			items = append(items, InputText(b.Text))
		case "image":
			items = append(items, InputImage("data:"+b.MimeType+";base64,"+b.Data))
		default:
			items = append(items, InputText(compactJSON(raw)))
		}
	}
	return items
}

func compactJSON(raw []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}
