package api

import "encoding/json"

// This file holds the bodies of the HTTP/JSON API served under /v1 (see
// api/openapi.yaml). Threads, turns and items are the protocol's own types,
// so what an HTTP client reads is what a websocket client reads.

// ProblemContentType is the media type of every HTTP API error body.
const ProblemContentType = "application/problem+json"

// The stable problem types of the HTTP API, one per error class (RFC 9457
// "type"); clients match on these, never on the detail text.
const (
	// ProblemInvalidRequest (400): malformed JSON, an unknown field, a
	// missing or invalid value, a bad query parameter or header.
	ProblemInvalidRequest = "urn:appserver:problem:invalid-request"
	// ProblemUnauthorized (401): missing or invalid bearer token.
	ProblemUnauthorized = "urn:appserver:problem:unauthorized"
	// ProblemNotFound (404): no such route, or no such thread, turn or
	// pending tool call visible to the caller.
	ProblemNotFound = "urn:appserver:problem:not-found"
	// ProblemMethodNotAllowed (405): the route exists for other methods.
	ProblemMethodNotAllowed = "urn:appserver:problem:method-not-allowed"
	// ProblemForbidden (403): the caller may not ask for this, e.g. a
	// principal asking for more than its sandbox or approval ceiling.
	ProblemForbidden = "urn:appserver:problem:forbidden"
	// ProblemConflict (409): the turn is not running, or the tool call was
	// already answered or settled.
	ProblemConflict = "urn:appserver:problem:conflict"
	// ProblemEventsGone (410): the events after the requested sequence
	// number are no longer buffered; re-read the items, then resume.
	ProblemEventsGone = "urn:appserver:problem:events-gone"
	// ProblemPayloadTooLarge (413): the request body exceeds the limit.
	ProblemPayloadTooLarge = "urn:appserver:problem:payload-too-large"
	// ProblemUnsupportedMediaType (415): a body that is not application/json.
	ProblemUnsupportedMediaType = "urn:appserver:problem:unsupported-media-type"
	// ProblemIdempotencyKeyReused (422): the Idempotency-Key was used before
	// with a different request body.
	ProblemIdempotencyKeyReused = "urn:appserver:problem:idempotency-key-reused"
	// ProblemInternal (500): an unexpected failure; details are in the log.
	ProblemInternal = "urn:appserver:problem:internal"
	// ProblemNotImplemented (501): the feature is not available yet.
	ProblemNotImplemented = "urn:appserver:problem:not-implemented"
	// ProblemUnavailable (503): the daemon is shutting down or its store
	// does not answer; retry later.
	ProblemUnavailable = "urn:appserver:problem:unavailable"
)

// Problem is an application/problem+json error body (RFC 9457).
type Problem struct {
	// Type is one of the Problem* constants.
	Type string `json:"type"`
	// Title is the short summary of the type.
	Title string `json:"title"`
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Detail explains this occurrence.
	Detail string `json:"detail,omitempty"`
	// Instance is the request path.
	Instance string `json:"instance,omitempty"`
}

// HTTPThreadCreateRequest is the body of POST /v1/threads. Every field is
// optional; the daemon's configuration supplies what is left out.
type HTTPThreadCreateRequest struct {
	// Model is the model slug.
	Model *string `json:"model,omitempty"`
	// ModelProvider is a configured provider id.
	ModelProvider *string `json:"modelProvider,omitempty"`
	// Cwd is the absolute working directory of the thread's tools.
	Cwd *string `json:"cwd,omitempty"`
	// Instructions replace the default system instructions.
	Instructions *string `json:"instructions,omitempty"`
	// DeveloperInstructions are sent as a developer message.
	DeveloperInstructions *string `json:"developerInstructions,omitempty"`
	// ApprovalPolicy is "untrusted", "on-request", "never" or the granular
	// object.
	ApprovalPolicy *AskForApproval `json:"approvalPolicy,omitempty"`
	// Sandbox is "read-only", "workspace-write" or "danger-full-access".
	Sandbox *SandboxMode `json:"sandbox,omitempty"`
	// DynamicTools registers the client's own tools; their calls appear on
	// the thread's event stream and are answered with POST
	// /v1/threads/{id}/tool-calls/{callId}.
	DynamicTools []DynamicToolSpec `json:"dynamicTools,omitempty"`
}

// HTTPThread is the body of POST /v1/threads and GET /v1/threads/{id}.
type HTTPThread struct {
	// Thread is the thread, as thread/read returns it.
	Thread Thread `json:"thread"`
}

// HTTPThreadList is the body of GET /v1/threads.
type HTTPThreadList struct {
	// Data are the threads, newest first.
	Data List[Thread] `json:"data"`
	// NextCursor continues the listing, or null on the last page.
	NextCursor *string `json:"nextCursor"`
}

// HTTPItem is one persisted item of a thread.
type HTTPItem struct {
	// Seq is the item's position in the thread (1, 2, …), or null for an
	// ephemeral thread's item.
	Seq *int64 `json:"seq"`
	// TurnID is the item's turn.
	TurnID string `json:"turnId"`
	// Item is the item.
	Item ThreadItem `json:"item"`
}

// HTTPItemList is the body of GET /v1/threads/{id}/items.
type HTTPItemList struct {
	// Data are the items in sequence order.
	Data List[HTTPItem] `json:"data"`
	// NextCursor continues the listing, or null on the last page.
	NextCursor *string `json:"nextCursor"`
}

// HTTPTurnCreateRequest is the body of POST /v1/threads/{id}/turns.
type HTTPTurnCreateRequest struct {
	// Input is the user input; required and not empty.
	Input List[UserInput] `json:"input"`
	// Model changes the thread's model from this turn on.
	Model *string `json:"model,omitempty"`
	// Effort sets the reasoning effort of this turn.
	Effort *ReasoningEffort `json:"effort,omitempty"`
	// OutputSchema constrains the final message (a JSON Schema).
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// ClientUserMessageID surfaces as the userMessage item's clientId.
	ClientUserMessageID *string `json:"clientUserMessageId,omitempty"`
}

// HTTPTurn is a turn as the HTTP API reports it: its state and, once it has
// ended, its items, final agent message and token usage in one body.
type HTTPTurn struct {
	// ID is the turn id.
	ID string `json:"id"`
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// Status is inProgress, completed, interrupted or failed.
	Status TurnStatus `json:"status"`
	// Error is set when the turn failed, else null.
	Error *TurnError `json:"error"`
	// StartedAt is the start time (Unix seconds), or null before the turn
	// started.
	StartedAt *int64 `json:"startedAt"`
	// CompletedAt is the end time (Unix seconds), or null.
	CompletedAt *int64 `json:"completedAt"`
	// Items are the turn's persisted items so far, in order.
	Items List[ThreadItem] `json:"items"`
	// FinalMessage is the text of the turn's last agent message, or null.
	FinalMessage *string `json:"finalMessage"`
	// Usage is the turn's token usage (all its model responses), or null
	// when the daemon did not observe the turn.
	Usage *TokenUsageBreakdown `json:"usage"`
	// EventsAfter, in the answer to POST .../turns, is a sequence number:
	// every event of this turn on GET .../events has a greater one, so
	// ?after=EventsAfter streams the turn from its start.
	EventsAfter *int64 `json:"eventsAfter,omitempty"`
}

// HTTPToolCallAnswer is the body of POST
// /v1/threads/{id}/tool-calls/{callId}: the same result a websocket client
// answers item/tool/call with. Both fields are required.
type HTTPToolCallAnswer = DynamicToolCallResult

// HTTPToolCallAnswered is the answer to a tool call's POST that was used.
type HTTPToolCallAnswered struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// CallID is the call that was answered.
	CallID string `json:"callId"`
}

// HTTPRequestAnswered is the answer to POST
// /v1/threads/{id}/approvals/{requestId} when it was used. The body of that
// POST is the result a websocket client answers the request with:
// CommandExecutionRequestApprovalResult, FileChangeRequestApprovalResult or
// ToolRequestUserInputResult.
type HTTPRequestAnswered struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// RequestID is the request that was answered.
	RequestID string `json:"requestId"`
}

// HTTPEvent is the data of one event on GET /v1/threads/{id}/events: the
// notification exactly as websocket subscribers get it. The SSE "id" is
// the event's sequence number and the SSE "event" repeats Method.
type HTTPEvent struct {
	// Method is the notification method, e.g. "item/agentMessage/delta".
	Method string `json:"method"`
	// Params are the notification's params.
	Params json.RawMessage `json:"params"`
	// EmittedAtMs is when the daemon emitted it (Unix ms).
	EmittedAtMs int64 `json:"emittedAtMs"`
	// RequestID is set on server requests (approvals, user input): answer
	// with POST /v1/threads/{id}/approvals/{requestId}.
	RequestID *string `json:"requestId,omitempty"`
}

// HTTPToolCallEventMethod is the event a pending dynamic tool call appears
// as on the event stream; its params are DynamicToolCallParams.
const HTTPToolCallEventMethod = "item/tool/call"

// HTTPToolCallResolvedMethod is the event that tells that a tool call shown
// on the stream was settled (answered over either transport, cancelled or
// timed out); its params are HTTPToolCallResolved.
const HTTPToolCallResolvedMethod = "item/tool/call/resolved"

// HTTPToolCallResolved are the params of item/tool/call/resolved.
type HTTPToolCallResolved struct {
	// ThreadID is the thread.
	ThreadID string `json:"threadId"`
	// TurnID is the call's turn.
	TurnID string `json:"turnId"`
	// CallID is the call.
	CallID string `json:"callId"`
	// Outcome is how it ended: success, failure, client_error,
	// invalid_response, cancelled, timeout, superseded or closed.
	Outcome string `json:"outcome"`
}

// HTTPStreamErrorMethod is the last event of a stream that fell so far
// behind that events it had not sent were dropped; its params are a
// Problem of type ProblemEventsGone. Reconnecting with Last-Event-ID then
// answers 410.
const HTTPStreamErrorMethod = "stream/error"
