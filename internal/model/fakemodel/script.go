package fakemodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// DefaultExhaustedText is the answer once every step has been used, unless
// Script.ExhaustedText says otherwise.
const DefaultExhaustedText = "(fake model: script exhausted)"

// Script is what the fake model answers: an ordered list of steps, each
// answering one request (or Times requests). See the package documentation
// for the file format.
type Script struct {
	// Steps are the scripted answers, used in order.
	Steps []Step `json:"steps"`
	// ExhaustedText is the text answered once all steps are used; empty
	// means DefaultExhaustedText.
	ExhaustedText string `json:"exhausted_text,omitempty"`
}

// Step answers one request: with a streamed response made of reasoning,
// text and tool calls, or with a failure.
type Step struct {
	// Name labels the step in logs and recorded requests.
	Name string `json:"name,omitempty"`
	// Match, when set, makes the step wait for a request it matches;
	// requests that do not match are answered by later steps.
	Match *Match `json:"match,omitempty"`
	// Times is how many requests the step answers (default 1).
	Times int `json:"times,omitempty"`
	// DelayMS delays the response headers.
	DelayMS int `json:"delay_ms,omitempty"`
	// EventDelayMS delays every stream event.
	EventDelayMS int `json:"event_delay_ms,omitempty"`
	// Headers are response headers sent with the step's answer (a stream
	// or an error), e.g. rate-limit headers.
	Headers map[string]string `json:"headers,omitempty"`
	// ResponseID overrides the generated response id (resp_<n> or
	// chatcmpl-<n>).
	ResponseID string `json:"response_id,omitempty"`
	// OutputItems are raw Responses output items (e.g. a hosted tool's
	// web_search_call) emitted first, as given; Responses wire only.
	OutputItems []json.RawMessage `json:"output_items,omitempty"`
	// Reasoning adds a reasoning item before the message.
	Reasoning *Reasoning `json:"reasoning,omitempty"`
	// Text is the assistant message; empty means no message item.
	Text string `json:"text,omitempty"`
	// Chunks splits Text into that many deltas (default 1).
	Chunks int `json:"chunks,omitempty"`
	// MessageID overrides the generated message item id (msg_<n>).
	MessageID string `json:"message_id,omitempty"`
	// ToolCalls are emitted after the message, in order.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Usage is reported on completion (zeros when absent).
	Usage *Usage `json:"usage,omitempty"`
	// Error answers with an HTTP error instead of a stream.
	Error *HTTPError `json:"error,omitempty"`
	// Fail breaks the stream after some events.
	Fail *StreamFailure `json:"fail,omitempty"`
}

// Match selects the requests a step answers.
type Match struct {
	// CallOutput matches a request whose last input item is the output of
	// this tool call id: a function_call_output, custom_tool_call_output or
	// tool_search_output,
	// or for Chat Completions a "tool" message followed by nothing but
	// image-only user messages.
	CallOutput string `json:"call_output,omitempty"`
	// UserText matches a request whose last user message contains this
	// text.
	UserText string `json:"user_text,omitempty"`
}

// Reasoning scripts a reasoning item.
type Reasoning struct {
	// ID overrides the generated item id (rs_<n>).
	ID string `json:"id,omitempty"`
	// Summary holds one string per summary part.
	Summary []string `json:"summary,omitempty"`
	// Text is raw reasoning content (reasoning_text deltas; Chat
	// Completions gets it, or else the joined summary, as
	// reasoning_content).
	Text string `json:"text,omitempty"`
	// Chunks splits each summary part and Text into that many deltas.
	Chunks int `json:"chunks,omitempty"`
	// EncryptedContent is returned as the item's encrypted_content.
	EncryptedContent string `json:"encrypted_content,omitempty"`
}

// ToolCall scripts one tool call.
type ToolCall struct {
	// Type is "function" (default), "custom" or "tool_search" (a
	// tool_search_call whose arguments are the Arguments object).
	Type string `json:"type,omitempty"`
	// ID overrides the generated item id (fc_<n>_<i> or ctc_<n>_<i>).
	ID string `json:"id,omitempty"`
	// CallID overrides the generated call id (call_<n>_<i>).
	CallID string `json:"call_id,omitempty"`
	// Name is the tool name. Required.
	Name string `json:"name"`
	// Namespace is the namespace a function call names its tool in
	// ("mcp__docs__"); "" sends none.
	Namespace string `json:"namespace,omitempty"`
	// Arguments are a function call's arguments: a JSON object (sent as
	// its compact text) or a string holding the raw argument text.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Input is a custom tool call's raw input.
	Input string `json:"input,omitempty"`
	// Chunks splits the arguments (or input) into that many deltas.
	Chunks int `json:"chunks,omitempty"`
}

// Usage is the token usage reported on completion.
type Usage struct {
	// InputTokens is input_tokens / prompt_tokens.
	InputTokens int64 `json:"input_tokens"`
	// CachedInputTokens is the cached_tokens detail of the input.
	CachedInputTokens int64 `json:"cached_input_tokens"`
	// OutputTokens is output_tokens / completion_tokens.
	OutputTokens int64 `json:"output_tokens"`
	// ReasoningOutputTokens is the reasoning_tokens detail of the output.
	ReasoningOutputTokens int64 `json:"reasoning_output_tokens"`
	// TotalTokens is total_tokens.
	TotalTokens int64 `json:"total_tokens"`
}

// HTTPError scripts an HTTP error answer.
type HTTPError struct {
	// Status is the HTTP status, 400–599. Required.
	Status int `json:"status"`
	// Message, Type and Code fill the {"error":{…}} body.
	Message string `json:"message,omitempty"`
	// Type is the error type, e.g. "rate_limit_error".
	Type string `json:"type,omitempty"`
	// Code is the error code, e.g. "rate_limit_exceeded".
	Code string `json:"code,omitempty"`
	// RetryAfter, when set, is sent as the Retry-After header.
	RetryAfter string `json:"retry_after,omitempty"`
	// Body, when set, is sent verbatim instead of the JSON error body.
	Body string `json:"body,omitempty"`
}

// The stream failure kinds of StreamFailure.Kind.
const (
	// FailCut ends the response body cleanly without completing.
	FailCut = "cut"
	// FailReset drops the connection mid-body.
	FailReset = "reset"
	// FailMalformed sends an event whose data is not JSON, then ends.
	FailMalformed = "malformed"
	// FailFailed sends a response.failed event (Chat Completions: an
	// {"error":{…}} chunk), then ends.
	FailFailed = "failed"
	// FailStall stops sending and holds the connection open until the
	// client goes away or the server closes.
	FailStall = "stall"
)

// StreamFailure breaks a stream after some events.
type StreamFailure struct {
	// Kind is one of the Fail… constants. Required.
	Kind string `json:"kind"`
	// AfterEvents is how many events are sent before the failure.
	AfterEvents int `json:"after_events,omitempty"`
	// Message and Code describe the error of a "failed" failure.
	Message string `json:"message,omitempty"`
	// Code is the error code of a "failed" failure.
	Code string `json:"code,omitempty"`
}

// ParseScript decodes a script file; unknown fields are errors, so typos do
// not go unnoticed.
func ParseScript(data []byte) (Script, error) {
	var s Script
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("fakemodel: parse script: %w", err)
	}
	return s, s.Validate()
}

// LoadScript reads and parses a script file.
func LoadScript(path string) (Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Script{}, fmt.Errorf("fakemodel: %w", err)
	}
	return ParseScript(data)
}

// Validate reports every inconsistency in the script.
func (s Script) Validate() error {
	var errs []error
	for i, st := range s.Steps {
		where := fmt.Sprintf("step %d", i)
		if st.Name != "" {
			where += fmt.Sprintf(" (%s)", st.Name)
		}
		if st.Times < 0 || st.Chunks < 0 || st.DelayMS < 0 || st.EventDelayMS < 0 {
			errs = append(errs, fmt.Errorf("%s: times, chunks and delays must not be negative", where))
		}
		if e := st.Error; e != nil && (e.Status < 400 || e.Status > 599) {
			errs = append(errs, fmt.Errorf("%s: error status %d is not in 400-599", where, e.Status))
		}
		if f := st.Fail; f != nil {
			switch f.Kind {
			case FailCut, FailReset, FailMalformed, FailFailed, FailStall:
			default:
				errs = append(errs, fmt.Errorf("%s: unknown fail kind %q", where, f.Kind))
			}
			if f.AfterEvents < 0 {
				errs = append(errs, fmt.Errorf("%s: after_events must not be negative", where))
			}
		}
		for j, raw := range st.OutputItems {
			var item struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(raw, &item) != nil || item.Type == "" {
				errs = append(errs, fmt.Errorf("%s: output item %d must be a JSON object with a type", where, j))
			}
		}
		for j, tc := range st.ToolCalls {
			if tc.Name == "" {
				errs = append(errs, fmt.Errorf("%s: tool call %d has no name", where, j))
			}
			if tc.Type != "" && tc.Type != "function" && tc.Type != "custom" && tc.Type != "tool_search" {
				errs = append(errs, fmt.Errorf("%s: tool call %d: unknown type %q", where, j, tc.Type))
			}
			if _, err := tc.argumentText(); err != nil {
				errs = append(errs, fmt.Errorf("%s: tool call %d: %w", where, j, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("fakemodel: invalid script: %w", err)
	}
	return nil
}

// argumentText returns the raw argument text of a function call.
func (tc ToolCall) argumentText() (string, error) {
	raw := bytes.TrimSpace(tc.Arguments)
	if len(raw) == 0 {
		return "{}", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func (s Step) times() int {
	return max(s.Times, 1)
}
