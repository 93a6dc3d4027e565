package model

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// chatClient speaks Chat Completions (POST {base}/chat/completions,
// stream=true) and translates to and from the Responses item model:
//
//   - Instructions become a leading system message; developer messages are
//     sent as system messages, which every compatible server accepts.
//   - function_call and custom_tool_call items become tool_calls on an
//     assistant message (consecutive calls share one message, following the
//     assistant's text if it came right before); their outputs become "tool"
//     messages. Images in tool outputs, which tool messages cannot carry, go
//     in a user message after the run of tool messages. Reasoning items are
//     not sent.
//   - Function tool specs are wrapped as {"type":"function","function":{…}}.
//     A custom (freeform) tool is offered as a function with a single string
//     parameter "input" (its grammar, if any, appended to the description);
//     a call to it comes back as a custom_tool_call whose Input is that
//     string, and its output is sent as a plain tool message. Hosted tools
//     (web_search, local_shell, …) do not exist in Chat Completions and are
//     dropped.
//   - Streamed tool-call fragments are accumulated by index. Item ids are
//     synthesised from the completion id: msg_<id> for the message and
//     rs_<id> for reasoning; tool calls use their call id (call_<id>_<index>
//     when the server sends none).
//   - Reasoning text that some servers stream as delta.reasoning_content or
//     delta.reasoning is surfaced as ReasoningTextDelta and a reasoning item.
type chatClient struct {
	t *transport
}

type chatRequest struct {
	Model             string              `json:"model"`
	Messages          []chatMessage       `json:"messages"`
	Tools             []chatTool          `json:"tools,omitempty"`
	ToolChoice        string              `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool               `json:"parallel_tool_calls,omitempty"`
	ReasoningEffort   string              `json:"reasoning_effort,omitempty"`
	ResponseFormat    *chatResponseFormat `json:"response_format,omitempty"`
	Stream            bool                `json:"stream"`
	StreamOptions     chatStreamOptions   `json:"stream_options"`
}

type chatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatResponseFormat struct {
	Type       string `json:"type"`
	JSONSchema struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict bool            `json:"strict"`
	} `json:"json_schema"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, a []map[string]any of parts, or nil (null).
	Content    any            `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function chatFunctionCall `json:"function"`
}

type chatFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// customInputSchema is the parameter schema of a custom tool offered as a
// function.
var customInputSchema = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"The raw input for the tool."}},"required":["input"],"additionalProperties":false}`)

// responsesTool is the flat Responses tool spec, as far as chat needs it.
type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
	Format      *struct {
		Type       string `json:"type"`
		Syntax     string `json:"syntax"`
		Definition string `json:"definition"`
	} `json:"format"`
}

// chatTools converts Responses tool specs; it returns the set of names that
// are custom tools, whose calls must come back as custom_tool_call items.
func chatTools(specs []json.RawMessage, log *slog.Logger) ([]chatTool, map[string]bool, error) {
	var tools []chatTool
	custom := map[string]bool{}
	for i, raw := range specs {
		var t responsesTool
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, nil, fmt.Errorf("tool %d: %w", i, err)
		}
		switch t.Type {
		case "function":
			tools = append(tools, chatTool{Type: "function", Function: chatFunction{
				Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict,
			}})
		case "custom":
			desc := t.Description
			if t.Format != nil && t.Format.Definition != "" {
				desc += fmt.Sprintf("\n\nThe \"input\" argument must match this %s grammar:\n%s", t.Format.Syntax, t.Format.Definition)
			}
			custom[t.Name] = true
			tools = append(tools, chatTool{Type: "function", Function: chatFunction{
				Name: t.Name, Description: desc, Parameters: customInputSchema,
			}})
		default:
			log.Debug("tool not available over chat completions; dropped", "type", t.Type, "name", t.Name)
		}
	}
	return tools, custom, nil
}

// chatMessages converts the instructions and history to chat messages.
func chatMessages(req Request) ([]chatMessage, error) {
	var msgs []chatMessage
	if req.Instructions != "" {
		msgs = append(msgs, chatMessage{Role: "system", Content: req.Instructions})
	}
	var images []map[string]any
	flushImages := func() {
		if len(images) > 0 {
			msgs = append(msgs, chatMessage{Role: "user", Content: images})
			images = nil
		}
	}
	for _, it := range req.Input {
		if it.Type != ItemFunctionCallOutput && it.Type != ItemCustomToolCallOutput {
			flushImages()
		}
		switch it.Type {
		case ItemMessage:
			switch it.Role {
			case RoleAssistant:
				msgs = append(msgs, chatMessage{Role: "assistant", Content: it.Text()})
			case RoleSystem, RoleDeveloper:
				msgs = append(msgs, chatMessage{Role: "system", Content: it.Text()})
			default:
				msgs = append(msgs, chatMessage{Role: it.Role, Content: chatUserContent(it.Content)})
			}
		case ItemFunctionCall, ItemCustomToolCall:
			args := it.Arguments
			if it.Type == ItemCustomToolCall {
				b, err := marshal(map[string]string{"input": it.Input})
				if err != nil {
					return nil, err
				}
				args = string(b)
			}
			call := chatToolCall{ID: it.CallID, Type: "function", Function: chatFunctionCall{Name: it.Name, Arguments: args}}
			if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
				if s, ok := msgs[n-1].Content.(string); ok && s == "" {
					msgs[n-1].Content = nil
				}
			} else {
				msgs = append(msgs, chatMessage{Role: "assistant", ToolCalls: []chatToolCall{call}})
			}
		case ItemFunctionCallOutput, ItemCustomToolCallOutput:
			var texts []string
			if it.Output.Content == nil {
				texts = append(texts, it.Output.Text)
			}
			for _, p := range it.Output.Content {
				if p.Type == PartInputImage {
					images = append(images, chatImagePart(p))
				} else {
					texts = append(texts, p.Text)
				}
			}
			msgs = append(msgs, chatMessage{Role: "tool", ToolCallID: it.CallID, Content: strings.Join(texts, "\n")})
		}
		// Reasoning and unknown items have no chat form.
	}
	flushImages()
	return msgs, nil
}

// chatUserContent sends a lone text part as a plain string, which every
// compatible server accepts, and anything else as content parts.
func chatUserContent(parts []ContentPart) any {
	if len(parts) == 1 && parts[0].Type != PartInputImage {
		return parts[0].Text
	}
	out := make([]map[string]any, 0, len(parts))
	for _, p := range parts {
		if p.Type == PartInputImage {
			out = append(out, chatImagePart(p))
		} else {
			out = append(out, map[string]any{"type": "text", "text": p.Text})
		}
	}
	return out
}

func chatImagePart(p ContentPart) map[string]any {
	img := map[string]any{"url": p.ImageURL}
	if p.Detail != "" {
		img["detail"] = p.Detail
	}
	return map[string]any{"type": "image_url", "image_url": img}
}

func buildChatBody(req Request, log *slog.Logger) ([]byte, map[string]bool, error) {
	msgs, err := chatMessages(req)
	if err != nil {
		return nil, nil, err
	}
	tools, custom, err := chatTools(req.Tools, log)
	if err != nil {
		return nil, nil, err
	}
	body := chatRequest{
		Model:           req.Model,
		Messages:        nonNil(msgs),
		Tools:           tools,
		ReasoningEffort: req.ReasoningEffort,
		Stream:          true,
		StreamOptions:   chatStreamOptions{IncludeUsage: true},
	}
	if len(tools) > 0 {
		body.ToolChoice = "auto"
		body.ParallelToolCalls = &req.ParallelToolCalls
	}
	if len(req.OutputSchema) > 0 {
		body.ResponseFormat = &chatResponseFormat{Type: "json_schema"}
		body.ResponseFormat.JSONSchema.Name = outputSchemaName
		body.ResponseFormat.JSONSchema.Schema = req.OutputSchema
		body.ResponseFormat.JSONSchema.Strict = true
	}
	b, err := marshal(body)
	return b, custom, err
}

// Stream implements Client.
func (c *chatClient) Stream(ctx context.Context, req Request, fn func(Event) error) (Result, error) {
	body, custom, err := buildChatBody(req, c.t.log)
	if err != nil {
		return Result{}, &Error{Kind: KindBadRequest, Message: "cannot encode request: " + err.Error(), Err: err}
	}
	c.t.logRequest(ctx, "chat request", req)
	h := &chatHandler{emit: emitter(fn), custom: custom, calls: map[int]*chatCallAcc{}}
	rb := newBody(body)
	rb.sent = req.Sent
	st, err := c.t.run(ctx, rb, h, req.LogAttrs)
	h.res.Attempts, h.res.RateLimits = st.attempts, st.limits
	return h.res, err
}

// chatChunk holds the fields of a chat.completion.chunk we use.
type chatChunk struct {
	ID      string `json:"id"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		TotalTokens         int64 `json:"total_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails *struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	Error *streamError `json:"error"`
}

type chatCallAcc struct {
	id, name string
	args     strings.Builder
	added    bool
}

// chatHandler accumulates chat chunks into items and Events.
type chatHandler struct {
	emit   func(Event) error
	custom map[string]bool
	res    Result

	text, reasoning    strings.Builder
	msgOpen, rsOpen    bool
	calls              map[int]*chatCallAcc
	finishReason       string
	msgID, reasoningID string
}

func (h *chatHandler) handle(data []byte) (bool, error) {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, []byte("[DONE]")) {
		return true, h.finish()
	}
	var c chatChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return false, malformed(data, err)
	}
	if c.Error != nil {
		return false, c.Error.toError("error chunk received")
	}
	if h.res.ResponseID == "" {
		h.res.ResponseID = c.ID
		if c.ID == "" {
			h.res.ResponseID = "chatcmpl-" + randomHex()
		}
		h.msgID, h.reasoningID = "msg_"+h.res.ResponseID, "rs_"+h.res.ResponseID
	}
	if u := c.Usage; u != nil {
		h.res.Usage = Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
		if u.PromptTokensDetails != nil {
			h.res.Usage.CachedInputTokens = u.PromptTokensDetails.CachedTokens
		}
		if u.CompletionTokensDetails != nil {
			h.res.Usage.ReasoningOutputTokens = u.CompletionTokensDetails.ReasoningTokens
		}
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // we ask for one choice
		}
		d := ch.Delta
		if r := firstNonEmpty(d.ReasoningContent, d.Reasoning); r != "" {
			if !h.rsOpen {
				h.rsOpen = true
				if err := h.emit(OutputItemAdded{Item: InputItem{Type: ItemReasoning, ID: h.reasoningID, Summary: []ContentPart{}}}); err != nil {
					return false, err
				}
			}
			h.reasoning.WriteString(r)
			if err := h.emit(ReasoningTextDelta{ItemID: h.reasoningID, Delta: r}); err != nil {
				return false, err
			}
		}
		if d.Content != nil && *d.Content != "" {
			if !h.msgOpen {
				h.msgOpen = true
				if err := h.emit(OutputItemAdded{Item: InputItem{Type: ItemMessage, ID: h.msgID, Role: RoleAssistant, Content: []ContentPart{}}}); err != nil {
					return false, err
				}
			}
			h.text.WriteString(*d.Content)
			if err := h.emit(TextDelta{ItemID: h.msgID, Delta: *d.Content}); err != nil {
				return false, err
			}
		}
		for _, tc := range d.ToolCalls {
			acc := h.calls[tc.Index]
			if acc == nil {
				acc = &chatCallAcc{}
				h.calls[tc.Index] = acc
			}
			if acc.id == "" {
				acc.id = tc.ID
			}
			if acc.name == "" {
				acc.name = tc.Function.Name
			}
			acc.args.WriteString(tc.Function.Arguments)
			if !acc.added && acc.name != "" {
				acc.added = true
				it := h.callItem(tc.Index, acc, false)
				if err := h.emit(OutputItemAdded{Item: it}); err != nil {
					return false, err
				}
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			h.finishReason = *ch.FinishReason
		}
	}
	return false, nil
}

// end accepts a stream that closed without [DONE] once a finish_reason was
// seen: some compatible servers never send [DONE].
func (h *chatHandler) end() error {
	if h.finishReason != "" {
		return h.finish()
	}
	return &Error{Kind: KindStreamDisconnected, Message: "stream closed before finish_reason"}
}

// finish emits the completed items, in the order reasoning, message, tool
// calls (by index), then Completed.
func (h *chatHandler) finish() error {
	var items []InputItem
	if h.rsOpen {
		items = append(items, InputItem{Type: ItemReasoning, ID: h.reasoningID, Summary: []ContentPart{},
			Content: []ContentPart{{Type: PartReasoningText, Text: h.reasoning.String()}}})
	}
	if h.msgOpen {
		items = append(items, InputItem{Type: ItemMessage, ID: h.msgID, Role: RoleAssistant,
			Content: []ContentPart{{Type: PartOutputText, Text: h.text.String()}}})
	}
	idx := make([]int, 0, len(h.calls))
	for i := range h.calls {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	for _, i := range idx {
		items = append(items, h.callItem(i, h.calls[i], true))
	}
	for _, it := range items {
		h.res.Items = append(h.res.Items, it)
		if err := h.emit(OutputItemDone{Item: it}); err != nil {
			return err
		}
	}
	return h.emit(Completed{ResponseID: h.res.ResponseID, Usage: h.res.Usage})
}

// callItem builds the item for tool call index; with done it carries the
// accumulated arguments (or the custom tool's input).
func (h *chatHandler) callItem(index int, acc *chatCallAcc, done bool) InputItem {
	callID := acc.id
	if callID == "" {
		callID = fmt.Sprintf("call_%s_%d", h.res.ResponseID, index)
		acc.id = callID
	}
	it := InputItem{Type: ItemFunctionCall, ID: callID, CallID: callID, Name: acc.name}
	if h.custom[acc.name] {
		it.Type = ItemCustomToolCall
		if done {
			it.Input = customInput(acc.args.String())
		}
		return it
	}
	if done {
		it.Arguments = acc.args.String()
	}
	return it
}

// customInput unwraps {"input": "..."}; arguments that are not that shape are
// passed through as the raw input rather than lost.
func customInput(args string) string {
	var v struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal([]byte(args), &v) == nil && v.Input != nil {
		return *v.Input
	}
	return args
}

func firstNonEmpty(ss ...*string) string {
	for _, s := range ss {
		if s != nil && *s != "" {
			return *s
		}
	}
	return ""
}

func randomHex() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
