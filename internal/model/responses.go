package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/appserver/appserver/internal/jsonscan"
)

// responsesClient speaks the OpenAI Responses API (POST {base}/responses,
// stream=true).
type responsesClient struct {
	t *transport
}

type reasoningParam struct {
	Effort  string `json:"effort,omitempty"`
	Summary string `json:"summary,omitempty"`
}

type textParam struct {
	Format    *textFormat `json:"format,omitempty"`
	Verbosity string      `json:"verbosity,omitempty"`
}

type textFormat struct {
	Type   string          `json:"type"`
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

// outputSchemaName names the structured-output format, as Codex names it.
const outputSchemaName = "codex_output_schema"

// appendResponsesBody writes the request body to b. It is written by hand
// rather than through encoding/json of a struct so that history items and
// tool specs go out byte-for-byte in the shape the caller stored, and so
// that pre-encoded items (InputWire) and specs are copied once instead of
// being re-validated and compacted on every request. Field order: model,
// instructions, input, tools, tool_choice, parallel_tool_calls, reasoning,
// store, stream, include, text.
func appendResponsesBody(b *bytes.Buffer, req Request) error {
	wire := req.InputWire
	if len(wire) != len(req.Input) {
		wire = make([]json.RawMessage, len(req.Input))
		for i, it := range req.Input {
			raw, err := wireItem(it)
			if err != nil {
				return fmt.Errorf("input item %d: %w", i, err)
			}
			wire[i] = raw
		}
	}
	size := 512 + len(req.Instructions) + len(req.OutputSchema)
	for _, w := range wire {
		size += len(w) + 1
	}
	for _, t := range req.Tools {
		size += len(t) + 1
	}
	b.Grow(size)
	b.WriteString(`{"model":`)
	if err := writeJSON(b, req.Model); err != nil {
		return err
	}
	if req.Instructions != "" {
		b.WriteString(`,"instructions":`)
		if err := writeJSON(b, req.Instructions); err != nil {
			return err
		}
	}
	b.WriteString(`,"input":`)
	if err := writeRawArray(b, wire); err != nil {
		return fmt.Errorf("input: %w", err)
	}
	b.WriteString(`,"tools":`)
	if err := writeRawArray(b, req.Tools); err != nil {
		return fmt.Errorf("tools: %w", err)
	}
	b.WriteString(`,"tool_choice":"auto","parallel_tool_calls":`)
	b.WriteString(strconv.FormatBool(req.ParallelToolCalls))
	include := `[]`
	summary := req.ReasoningSummary
	if summary == "none" {
		summary = ""
	}
	if req.ReasoningEffort != "" || summary != "" {
		b.WriteString(`,"reasoning":`)
		if err := writeJSON(b, reasoningParam{Effort: req.ReasoningEffort, Summary: summary}); err != nil {
			return err
		}
		// With store=false, reasoning can only be carried to the next
		// request in its encrypted form.
		include = `["reasoning.encrypted_content"]`
	}
	b.WriteString(`,"store":false,"stream":true,"include":`)
	b.WriteString(include)
	if req.ServiceTier != "" {
		b.WriteString(`,"service_tier":`)
		if err := writeJSON(b, req.ServiceTier); err != nil {
			return err
		}
	}
	if len(req.OutputSchema) > 0 || req.Verbosity != "" {
		text := textParam{Verbosity: req.Verbosity}
		if len(req.OutputSchema) > 0 {
			if !json.Valid(req.OutputSchema) {
				return errors.New("output schema is not valid JSON")
			}
			text.Format = &textFormat{Type: "json_schema", Name: outputSchemaName, Schema: req.OutputSchema, Strict: true}
		}
		b.WriteString(`,"text":`)
		if err := writeJSON(b, text); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

// writeJSON appends v encoded without HTML escaping (as marshal does),
// straight into b.
func writeJSON(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	n := b.Len()
	if err := enc.Encode(v); err != nil {
		b.Truncate(n)
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}

// writeRawArray appends items as a JSON array. Items are written as they
// are (they come from our own encoder); an empty one is an error, not a
// malformed body.
func writeRawArray(b *bytes.Buffer, items []json.RawMessage) error {
	b.WriteByte('[')
	for i, it := range items {
		if len(it) == 0 {
			return fmt.Errorf("item %d is empty", i)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it)
	}
	b.WriteByte(']')
	return nil
}

// marshal encodes v without HTML escaping, so prompts and tool output keep
// their <, > and & as written.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Stream implements Client.
func (c *responsesClient) Stream(ctx context.Context, req Request, fn func(Event) error) (Result, error) {
	body := newPooledBody()
	if err := appendResponsesBody(body.buf, req); err != nil {
		body.done()
		return Result{}, &Error{Kind: KindBadRequest, Message: "cannot encode request: " + err.Error(), Err: err}
	}
	c.t.logRequest(ctx, "responses request", req)
	body.sent = req.Sent
	h := &responsesHandler{emit: emitter(fn)}
	st, err := c.t.run(ctx, body, h, req.LogAttrs)
	h.res.Attempts, h.res.RateLimits = st.attempts, st.limits
	return h.res, err
}

// responsesHandler turns Responses API stream events into Events.
type responsesHandler struct {
	emit func(Event) error
	res  Result
}

// responsesEvent holds the fields of the stream events we use.
type responsesEvent struct {
	Type         string                  `json:"type"`
	ItemID       string                  `json:"item_id"`
	Delta        string                  `json:"delta"`
	SummaryIndex int                     `json:"summary_index"`
	ContentIndex int                     `json:"content_index"`
	Item         json.RawMessage         `json:"item"`
	Response     *responsesEventResponse `json:"response"`
	// Code and Message are set on "error" events; Error on providers that
	// nest them.
	Code    any          `json:"code"`
	Message string       `json:"message"`
	Error   *streamError `json:"error"`
}

// responsesEventResponse holds the fields of an event's response object
// that we use.
type responsesEventResponse struct {
	ID                string          `json:"id"`
	Usage             *responsesUsage `json:"usage"`
	Error             *streamError    `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
}

type responsesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// quickEvent decodes the events every response carries (its output items,
// response.created and response.completed) without encoding/json, which is
// most of the work of reading a short response. It takes only the members
// that a full decode into e would use, and reports false whenever that
// decode could come out differently or fail: any other member decode
// knows (see jsonscan.Pick); a member of another JSON type; an escape or
// non-ASCII byte in a string it reads; invalid JSON. The caller then
// decodes in full. e must be zero.
func quickEvent(data []byte, e *responsesEvent) bool {
	var v [len(eventFields)][]byte
	if !jsonscan.PickObject(data, eventFields[:], v[:]) {
		return false
	}
	for _, other := range v[3:] {
		if other != nil {
			return false
		}
	}
	typ, item, resp := v[0], v[1], v[2]
	t, ok := jsonscan.PlainString(typ)
	if !ok {
		return false
	}
	switch t {
	case "response.output_item.added", "response.output_item.done":
		if resp != nil || len(item) == 0 || item[0] != '{' {
			return false
		}
		e.Type, e.Item = t, item
		return true
	case "response.created", "response.completed":
		if item != nil || len(resp) == 0 || resp[0] != '{' {
			return false
		}
		e.Type = t
		return quickResponse(resp, e)
	}
	return false
}

// eventFields are the keys of responsesEvent: the three quickEvent reads,
// then those it leaves to the full decode.
var eventFields = [...]string{"type", "item", "response", "item_id", "delta", "summary_index", "content_index", "code", "message", "error"}

// responseFields are the keys of responsesEventResponse.
var responseFields = [...]string{"id", "usage", "error", "incomplete_details"}

// quickResponse decodes the members of a response object that
// responsesEvent keeps: its id and usage (error and incomplete_details
// only when null).
func quickResponse(data []byte, e *responsesEvent) bool {
	var v [len(responseFields)][]byte
	if !jsonscan.PickObject(data, responseFields[:], v[:]) {
		return false
	}
	id, usage, errv, incomplete := v[0], v[1], v[2], v[3]
	if errv != nil && string(errv) != "null" || incomplete != nil && string(incomplete) != "null" {
		return false
	}
	e.Response = &responsesEventResponse{}
	if id != nil && string(id) != "null" {
		var ok bool
		if e.Response.ID, ok = jsonscan.PlainString(id); !ok {
			return false
		}
	}
	if usage != nil && string(usage) != "null" {
		u := new(responsesUsage)
		if usage[0] != '{' || json.Unmarshal(usage, u) != nil {
			return false
		}
		e.Response.Usage = u
	}
	return true
}

// itemFields are the keys InputItem.UnmarshalJSON decodes: those a tool
// call uses (up to fieldInput), then the others.
var itemFields = [...]string{"type", "id", "call_id", "name", "arguments", "input", "namespace", "role", "content", "output", "summary", "encrypted_content"}

// Indexes into itemFields.
const (
	fieldType = iota
	fieldID
	fieldCallID
	fieldName
	fieldArguments
	fieldInput
	fieldNamespace
	fieldsOfCalls // the fields from here on no tool call uses
)

// quickToolCall decodes a function or custom tool call item, the output
// items a tool round is made of, into *it without encoding/json; it
// reports false (leaving *it alone, and the caller decodes in full) for
// any other item and whenever the full decode could come out differently
// or fail: a key it could match otherwise (jsonscan.Pick), a member of the
// call's that is not a string (null included), any member the call does
// not use (the full decode would still decode it), invalid JSON.
func quickToolCall(data []byte, it *InputItem) bool {
	var v [len(itemFields)][]byte
	if !jsonscan.PickObject(data, itemFields[:], v[:]) {
		return false
	}
	typ, ok := jsonscan.PlainString(v[fieldType])
	if !ok {
		return false
	}
	// payload is the call's arguments or input, other the one it lacks.
	payload, other := fieldArguments, fieldInput
	switch typ {
	case ItemFunctionCall:
	case ItemCustomToolCall:
		payload, other = fieldInput, fieldArguments
	default:
		return false
	}
	if v[other] != nil {
		return false
	}
	for _, unused := range v[fieldsOfCalls:] {
		if unused != nil {
			return false
		}
	}
	var str [fieldsOfCalls]string
	if typ == ItemCustomToolCall && v[fieldNamespace] != nil {
		return false
	}
	for _, i := range [...]int{fieldID, fieldCallID, fieldName, fieldNamespace, payload} {
		if v[i] == nil {
			continue
		}
		if v[i][0] != '"' {
			return false
		}
		if str[i], ok = jsonscan.Text(v[i]); !ok {
			return false
		}
	}
	*it = InputItem{Type: typ, ID: str[fieldID], CallID: str[fieldCallID], Name: str[fieldName], Namespace: str[fieldNamespace]}
	if typ == ItemFunctionCall {
		it.Arguments = str[payload]
	} else {
		it.Input = str[payload]
	}
	return true
}

// responsesHandled reports whether handle acts on events of type typ.
func responsesHandled(typ []byte) bool {
	switch string(typ) {
	case "response.created", "response.output_item.added", "response.output_item.done",
		"response.output_text.delta", "response.reasoning_summary_part.added",
		"response.reasoning_summary_text.delta", "response.reasoning_text.delta",
		"response.completed", "response.failed", "response.incomplete", "error", "":
		return true
	}
	return false
}

// leadingType returns the value of "type" when it is the first member of
// the JSON object data, a string without escapes, and the only "type" in
// data; ok is false otherwise (the caller then decodes the event in full).
func leadingType(data []byte) (typ []byte, ok bool) {
	rest, ok := skipPrefix(data, '{')
	if !ok {
		return nil, false
	}
	rest = bytes.TrimLeft(rest, " \t\r\n")
	if !bytes.HasPrefix(rest, []byte(`"type"`)) {
		return nil, false
	}
	if rest, ok = skipPrefix(rest[len(`"type"`):], ':'); !ok {
		return nil, false
	}
	if rest, ok = skipPrefix(rest, '"'); !ok {
		return nil, false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return nil, false
	}
	// encoding/json takes the last of duplicate keys, matches keys without
	// regard to case and unescapes them: with any other "type" in the event
	// in any case (nested ones included), or any \u escape that could spell
	// one, decode it in full.
	if hasTypeKey(rest[end+1:]) || bytes.Contains(rest[end+1:], []byte(`\u`)) {
		return nil, false
	}
	return rest[:end], true
}

// hasTypeKey reports whether b contains "type" in quotes, in any case.
func hasTypeKey(b []byte) bool {
	for {
		i := bytes.IndexByte(b, '"')
		if i < 0 || len(b) < i+6 {
			return false
		}
		if b[i+5] == '"' && bytes.EqualFold(b[i+1:i+5], []byte("type")) {
			return true
		}
		b = b[i+1:]
	}
}

// skipPrefix skips JSON whitespace and then the byte c.
func skipPrefix(b []byte, c byte) ([]byte, bool) {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 || b[0] != c {
		return nil, false
	}
	return b[1:], true
}

// streamError is an error object reported inside a stream.
type streamError struct {
	Code    any    `json:"code"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (se *streamError) toError(fallback string) *Error {
	code := anyString(se.Code)
	msg := se.Message
	if msg == "" {
		msg = fallback
	}
	return &Error{Kind: classifyStreamFailure(code, se.Type), Code: code, Message: msg}
}

func (h *responsesHandler) handle(data []byte) (bool, error) {
	// Most events of a stream are ones we ignore (function call argument
	// deltas, content part and in-progress events, ...); when the type
	// comes first, as OpenAI sends it, they are only checked to be JSON
	// instead of being decoded.
	if typ, ok := leadingType(data); ok && !responsesHandled(typ) && json.Valid(data) {
		return false, nil
	}
	var e responsesEvent
	if quickEvent(data, &e) {
		return h.dispatch(&e, data)
	}
	return h.decode(data)
}

// decode handles one event by decoding it in full.
func (h *responsesHandler) decode(data []byte) (bool, error) {
	var e responsesEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return false, malformed(data, err)
	}
	return h.dispatch(&e, data)
}

// dispatch handles the decoded event e, whose data is data.
func (h *responsesHandler) dispatch(e *responsesEvent, data []byte) (bool, error) {
	switch e.Type {
	case "response.created":
		if e.Response != nil {
			h.res.ResponseID = e.Response.ID
		}
	case "response.output_item.added", "response.output_item.done":
		var it InputItem
		var err error
		if !quickToolCall(e.Item, &it) {
			err = json.Unmarshal(e.Item, &it)
		}
		if err != nil || it.Type == "" {
			if err == nil {
				err = fmt.Errorf("output item without a type")
			}
			return false, malformed(data, err)
		}
		if e.Type == "response.output_item.added" {
			return false, h.emit(OutputItemAdded{Item: it})
		}
		h.res.Items = append(h.res.Items, it)
		return false, h.emit(OutputItemDone{Item: it})
	case "response.output_text.delta":
		return false, h.emit(TextDelta{ItemID: e.ItemID, Delta: e.Delta})
	case "response.reasoning_summary_part.added":
		return false, h.emit(ReasoningSummaryPartAdded{ItemID: e.ItemID, Index: e.SummaryIndex})
	case "response.reasoning_summary_text.delta":
		return false, h.emit(ReasoningSummaryDelta{ItemID: e.ItemID, Index: e.SummaryIndex, Delta: e.Delta})
	case "response.reasoning_text.delta":
		return false, h.emit(ReasoningTextDelta{ItemID: e.ItemID, Index: e.ContentIndex, Delta: e.Delta})
	case "response.completed":
		if e.Response != nil {
			if e.Response.ID != "" {
				h.res.ResponseID = e.Response.ID
			}
			if u := e.Response.Usage; u != nil {
				h.res.Usage = Usage{
					InputTokens:           u.InputTokens,
					CachedInputTokens:     u.InputTokensDetails.CachedTokens,
					OutputTokens:          u.OutputTokens,
					ReasoningOutputTokens: u.OutputTokensDetails.ReasoningTokens,
					TotalTokens:           u.TotalTokens,
				}
			}
		}
		return true, h.emit(Completed{ResponseID: h.res.ResponseID, Usage: h.res.Usage})
	case "response.failed":
		if e.Response != nil && e.Response.Error != nil {
			return false, e.Response.Error.toError("response.failed event received")
		}
		return false, &Error{Kind: KindStreamDisconnected, Message: "response.failed event received"}
	case "response.incomplete":
		reason := "unknown"
		if e.Response != nil && e.Response.IncompleteDetails != nil && e.Response.IncompleteDetails.Reason != "" {
			reason = e.Response.IncompleteDetails.Reason
		}
		return false, &Error{Kind: KindStreamDisconnected, Message: "Incomplete response returned, reason: " + reason}
	case "error":
		se := e.Error
		if se == nil {
			se = &streamError{Code: e.Code, Message: e.Message}
		}
		return false, se.toError("error event received")
	case "":
		if e.Error != nil {
			return false, e.Error.toError("error event received")
		}
		return false, malformed(data, fmt.Errorf("event without a type"))
	}
	return false, nil
}

func (h *responsesHandler) end() error {
	return &Error{Kind: KindStreamDisconnected, Message: "stream closed before response.completed"}
}

// malformed reports an undecodable stream event, quoting a bounded prefix.
func malformed(data []byte, err error) *Error {
	const quote = 200
	d := string(bytes.TrimSpace(data))
	if len(d) > quote {
		d = d[:quote] + "..."
	}
	return &Error{Kind: KindMalformed, Message: fmt.Sprintf("cannot decode stream event %q: %v", d, err), Err: err}
}
