package model

import (
	"context"
	"encoding/json"
	"log/slog"
)

// Request is one model call: the instructions, the whole history and the
// tools on offer.
type Request struct {
	// Model is the model slug sent upstream, e.g. "gpt-5.1-codex".
	Model string
	// Instructions is the system prompt ("instructions" in the Responses
	// API, a leading system message in Chat Completions).
	Instructions string
	// Input is the conversation history, oldest first.
	Input []InputItem
	// InputWire, when it has exactly one entry per Input item, holds each
	// item's upstream encoding (WireJSON), which the Responses client then
	// sends as it is instead of encoding the history again. Callers that
	// keep a growing history encode each item once. Chat ignores it.
	InputWire []json.RawMessage
	// Tools holds tool specs in the Responses API's flat shape:
	// {"type":"function","name","description","strict","parameters"},
	// {"type":"custom",...} or hosted tools such as {"type":"web_search"}.
	// The Chat Completions client converts them (see chat.go).
	Tools []json.RawMessage
	// ParallelToolCalls lets the model emit several tool calls in one
	// response.
	ParallelToolCalls bool
	// ReasoningEffort is sent as reasoning.effort (or reasoning_effort for
	// chat) when not empty.
	ReasoningEffort string
	// ReasoningSummary is sent as reasoning.summary when not empty and not
	// "none" (Responses API only).
	ReasoningSummary string
	// ServiceTier is sent as service_tier when not empty (Responses API
	// only), e.g. "priority".
	ServiceTier string
	// Verbosity is sent as text.verbosity when not empty (Responses API
	// only): "low", "medium" or "high".
	Verbosity string
	// OutputSchema, when set, constrains the final answer to this JSON
	// Schema (strict structured output).
	OutputSchema json.RawMessage
	// Sent, when set, is called once per Stream: when net/http has
	// written the request (httptrace's WroteRequest: over HTTP/1.1, into
	// the connection's buffer, which is flushed right after), or when the
	// first attempt ended without writing it (a failed dial, say), so
	// never later than the first retry's wait. It runs on whichever
	// goroutine gets there first, net/http's writer among them, and must
	// not block. A caller starts there the work that should not compete
	// with sending the request.
	Sent func()
	// LogAttrs are added to the request's log lines (its debug line, a
	// retry's warning), so that they name what the caller is doing (a
	// thread and turn). The client adds the provider id itself.
	LogAttrs []slog.Attr
}

// Client streams one model response. Implementations are safe for
// concurrent use.
type Client interface {
	// Stream sends req and calls fn (which may be nil), in order and on the
	// calling goroutine, for every event of the response until it
	// completes. It returns the response's id, usage and completed output
	// items; after a failure, the Result holds what completed before it.
	// Transient failures before the response starts streaming (429, 5xx,
	// connection errors) are retried as configured. Any other failure is
	// returned as an *Error (KindCanceled when ctx ends); an error returned
	// by fn stops the stream and is returned unchanged. Once it returns,
	// it neither reads nor keeps req.Input, req.InputWire or what they
	// hold: the caller builds its next request in the same slices, a
	// turn's and then the thread's next turn's (loop.Run.requestInput).
	Stream(ctx context.Context, req Request, fn func(Event) error) (Result, error)
}

// Result summarises a completed response.
type Result struct {
	// ResponseID is the upstream response id (resp_…, or chatcmpl-… for
	// Chat Completions).
	ResponseID string
	// Usage is the token accounting of this response.
	Usage Usage
	// Items are the completed output items in the order the model produced
	// them; append them to the history to continue the conversation.
	Items []InputItem
	// Attempts is how many HTTP requests the response took, retries
	// included (0 when none was made).
	Attempts int
	// RateLimits are the provider's rate limits as the last response
	// headers that carried any reported them, nil when none did.
	RateLimits *RateLimits
}

// Usage is the token accounting of one model response.
type Usage struct {
	// InputTokens counts the prompt, cached tokens included.
	InputTokens int64 `json:"input_tokens"`
	// CachedInputTokens is the part of InputTokens served from the cache.
	CachedInputTokens int64 `json:"cached_input_tokens"`
	// OutputTokens counts generated tokens, reasoning included.
	OutputTokens int64 `json:"output_tokens"`
	// ReasoningOutputTokens is the part of OutputTokens spent reasoning.
	ReasoningOutputTokens int64 `json:"reasoning_output_tokens"`
	// TotalTokens is input plus output as reported upstream.
	TotalTokens int64 `json:"total_tokens"`
}

// Event is one streamed model event: one of [TextDelta],
// [ReasoningSummaryPartAdded], [ReasoningSummaryDelta], [ReasoningTextDelta],
// [OutputItemAdded], [OutputItemDone] or [Completed].
type Event interface{ isEvent() }

// TextDelta is a chunk of assistant message text. Deltas for one ItemID
// concatenate, in arrival order, to the message text.
type TextDelta struct {
	ItemID string // the message item's id
	Delta  string // the next piece of text
}

// ReasoningSummaryPartAdded starts a new reasoning summary section.
type ReasoningSummaryPartAdded struct {
	ItemID string // the reasoning item's id
	Index  int    // the new section's summary index
}

// ReasoningSummaryDelta is a chunk of the reasoning summary section Index.
type ReasoningSummaryDelta struct {
	ItemID string // the reasoning item's id
	Index  int    // the summary section it extends
	Delta  string // the next piece of summary text
}

// ReasoningTextDelta is a chunk of raw reasoning text (content part Index),
// for models that expose it.
type ReasoningTextDelta struct {
	ItemID string // the reasoning item's id
	Index  int    // the content part it extends
	Delta  string // the next piece of reasoning text
}

// OutputItemAdded announces an output item the model started; Item carries
// what is known so far (its id and type, usually no content yet).
type OutputItemAdded struct {
	Item InputItem // the item as started
}

// OutputItemDone delivers a completed output item: a message with its full
// text, a reasoning item, or a tool call with its full arguments or input.
type OutputItemDone struct {
	Item InputItem // the complete item
}

// Completed ends a successful response.
type Completed struct {
	ResponseID string // the upstream response id
	Usage      Usage  // the response's token usage
}

func (TextDelta) isEvent()                 {}
func (ReasoningSummaryPartAdded) isEvent() {}
func (ReasoningSummaryDelta) isEvent()     {}
func (ReasoningTextDelta) isEvent()        {}
func (OutputItemAdded) isEvent()           {}
func (OutputItemDone) isEvent()            {}
func (Completed) isEvent()                 {}
