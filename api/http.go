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
	// RequestID is the request's id, as answered in its X-Request-Id
	// header.
	RequestID string `json:"requestId,omitempty"`
}

// HTTPThreadCreateRequest is the body of POST /v1/threads. Every field is
// optional; the daemon's configuration supplies what is left out.
type HTTPThreadCreateRequest struct {
	// Model is the model slug.
	Model *string `json:"model,omitempty"`
	// ModelProvider is a configured provider id.
	ModelProvider *string `json:"modelProvider,omitempty"`
	// Cwd is the absolute working directory of the thread's tools; a
	// principal's must lie inside its workspace roots (default: its first
	// root).
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

// HTTPTicket is the body of POST /v1/auth/ticket: a single-use credential
// a browser opens one websocket or one event stream with.
type HTTPTicket struct {
	// Ticket goes in the subprotocol appserver.ticket.<ticket> of a
	// websocket upgrade or the ticket query parameter.
	Ticket string `json:"ticket"`
	// ExpiresIn is how many seconds it stays valid.
	ExpiresIn int64 `json:"expiresIn"`
}

// HTTPSession is the body of POST /v1/auth/session, which sets the
// session cookie.
type HTTPSession struct {
	// ExpiresIn is how many seconds the cookie stays valid.
	ExpiresIn int64 `json:"expiresIn"`
}

// HTTPWebhookCreate is the body of POST /v1/webhooks.
type HTTPWebhookCreate struct {
	// URL is the receiver: http:// or https://.
	URL string `json:"url"`
	// Events are the event types to post; empty or absent for all.
	Events []string `json:"events,omitempty"`
	// ThreadID limits the subscription to one thread the caller sees.
	ThreadID *string `json:"threadId,omitempty"`
	// Secret is the signing secret (whsec_ and the base64 of 24 to 64
	// bytes); absent, the daemon makes one and answers it once.
	Secret *string `json:"secret,omitempty"`
	// AllowPrivate lets the receiver be on a loopback, private or
	// link-local address: the operator's only.
	AllowPrivate bool `json:"allowPrivate,omitempty"`
}

// HTTPWebhook is a webhook subscription.
type HTTPWebhook struct {
	ID       string   `json:"id"`
	URL      string   `json:"url"`
	Events   []string `json:"events"`
	ThreadID *string  `json:"threadId"`
	// Owner is the principal that made it, null for the operator.
	Owner        *string `json:"owner"`
	AllowPrivate bool    `json:"allowPrivate"`
	// CreatedAt is RFC 3339 in UTC.
	CreatedAt string `json:"createdAt"`
	// Secret is present in the answer to its creation only.
	Secret *string `json:"secret,omitempty"`
}

// HTTPWebhookList is the body of GET /v1/webhooks.
type HTTPWebhookList struct {
	// Data are the caller's subscriptions (every one for the operator),
	// oldest first.
	Data List[HTTPWebhook] `json:"data"`
	// NextCursor is always null: the subscriptions fit one page.
	NextCursor *string `json:"nextCursor"`
}

// HTTPWebhookDelivery is one attempt to post a webhook's notice.
type HTTPWebhookDelivery struct {
	// EventID is the notice's webhook-id: the same on every attempt.
	EventID   string `json:"eventId"`
	EventType string `json:"eventType"`
	// At is when the attempt started, RFC 3339 in UTC.
	At string `json:"at"`
	// Status is the receiver's HTTP status, null when it gave none.
	Status *int `json:"status"`
	// Error says why the attempt failed, null for a success.
	Error      *string `json:"error"`
	DurationMs float64 `json:"durationMs"`
	// NextRetryAt is when the notice is tried again, null when it is not.
	NextRetryAt *string `json:"nextRetryAt"`
}

// HTTPWebhookDeliveryList is the body of GET /v1/webhooks/{id}/deliveries.
type HTTPWebhookDeliveryList struct {
	// Data are the attempts, newest first.
	Data List[HTTPWebhookDelivery] `json:"data"`
	// NextCursor continues with older attempts, or null on the last page.
	NextCursor *string `json:"nextCursor"`
}

// HTTPAuditEntry is one entry of the audit log (GET /v1/audit).
type HTTPAuditEntry struct {
	// Seq orders the log; it is the entry's position in it.
	Seq int64 `json:"seq"`
	// At is when the action happened, RFC 3339 in UTC.
	At string `json:"at"`
	// Kind is approval, tool_call, config_write, thread_delete or admin.
	Kind string `json:"kind"`
	// Principal is whom the action was done for (who answered an
	// approval; whose thread a tool call ran in); null for the operator.
	Principal *string `json:"principal"`
	// Client names the connection: clientInfo.name and the connection's
	// id, http#<request id>, or mcp#<session>; "" when none.
	Client string `json:"client"`
	// Node is the daemon's node id.
	Node string `json:"node"`
	// TraceID is the request's OpenTelemetry trace id, null when none.
	TraceID  *string `json:"traceId"`
	ThreadID *string `json:"threadId"`
	TurnID   *string `json:"turnId"`
	// Detail says what exactly was done; its members depend on Kind.
	Detail json.RawMessage `json:"detail"`
}

// HTTPAuditList is the body of GET /v1/audit.
type HTTPAuditList struct {
	// Data are the entries, oldest first.
	Data List[HTTPAuditEntry] `json:"data"`
	// NextCursor continues with newer entries, or null on the last page.
	NextCursor *string `json:"nextCursor"`
}

// HTTPQueueAddRequest is the body of POST /v1/threads/{id}/queue.
type HTTPQueueAddRequest struct {
	// ClientUserMessageID is the caller's id of the message; required. A
	// second POST with it answers the entry it queued.
	ClientUserMessageID string `json:"clientUserMessageId"`
	// Input is the user input; required and not empty.
	Input List[UserInput] `json:"input"`
	// ResponsesapiClientMetadata is kept with the entry.
	ResponsesapiClientMetadata map[string]string `json:"responsesapiClientMetadata,omitempty"`
}

// HTTPQueueUpdateRequest is the body of PATCH
// /v1/threads/{id}/queue/{queuedId}.
type HTTPQueueUpdateRequest struct {
	// Input replaces the entry's input; required and not empty.
	Input List[UserInput] `json:"input"`
	// ResponsesapiClientMetadata, when not empty, replaces the entry's.
	ResponsesapiClientMetadata map[string]string `json:"responsesapiClientMetadata,omitempty"`
}

// HTTPQueueOrderRequest is the body of PUT /v1/threads/{id}/queue.
type HTTPQueueOrderRequest struct {
	// QueuedSubmissionIDs are every entry of the queue, once each, in
	// their new order.
	QueuedSubmissionIDs []string `json:"queuedSubmissionIds"`
}
