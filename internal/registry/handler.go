package registry

import (
	"context"
)

// PayloadKind names the shape of what the model sent for a tool call
// (docs/tools.md §1.2). The string values are the ones used in hook events.
type PayloadKind string

// The payload kinds the model can produce.
const (
	// PayloadFunction is a function_call with a raw JSON arguments string.
	PayloadFunction PayloadKind = "function"
	// PayloadCustom is a custom_tool_call (freeform tool) with raw text input.
	PayloadCustom PayloadKind = "custom"
	// PayloadLocalShell is a local_shell_call with a structured action.
	PayloadLocalShell PayloadKind = "local_shell"
	// PayloadMCP is a function_call whose name resolved to an MCP tool.
	PayloadMCP PayloadKind = "mcp"
	// PayloadToolSearch is a tool_search_call: the model searching the
	// deferred tools (ToolSearchSpec).
	PayloadToolSearch PayloadKind = "tool_search"
)

// Payload is what the model sent for one call. It is one of
// FunctionPayload, CustomPayload, LocalShellPayload, MCPPayload or
// ToolSearchPayload.
type Payload interface {
	// Kind reports which payload variant this is.
	Kind() PayloadKind
	isPayload()
}

// FunctionPayload carries the raw JSON arguments string of a function_call.
type FunctionPayload struct {
	// Arguments is the raw JSON text the model produced; it may be invalid.
	Arguments string
}

// Kind returns PayloadFunction.
func (FunctionPayload) Kind() PayloadKind { return PayloadFunction }
func (FunctionPayload) isPayload()        {}

// CustomPayload carries the raw text input of a freeform (custom) tool call.
type CustomPayload struct {
	// Input is the raw text the model produced, e.g. a patch.
	Input string
}

// Kind returns PayloadCustom.
func (CustomPayload) Kind() PayloadKind { return PayloadCustom }
func (CustomPayload) isPayload()        {}

// LocalShellAction is the action of a Responses local_shell_call item.
type LocalShellAction struct {
	// Command is the argv to run.
	Command []string
	// TimeoutMS is the requested timeout in milliseconds, nil when absent.
	TimeoutMS *int64
	// WorkingDirectory is the requested working directory, "" when absent.
	WorkingDirectory string
	// Env holds extra environment variables requested by the model.
	Env map[string]string
	// User is the requested user, "" when absent.
	User string
}

// LocalShellPayload carries the action of a local_shell_call.
type LocalShellPayload struct {
	// Action is the command the model asked to run.
	Action LocalShellAction
}

// Kind returns PayloadLocalShell.
func (LocalShellPayload) Kind() PayloadKind { return PayloadLocalShell }
func (LocalShellPayload) isPayload()        {}

// MCPPayload carries a call to a tool of an MCP server.
type MCPPayload struct {
	// Server is the configured MCP server name.
	Server string
	// Tool is the tool name as the server knows it.
	Tool string
	// RawArguments is the raw JSON arguments string; "" means no arguments.
	RawArguments string
}

// Kind returns PayloadMCP.
func (MCPPayload) Kind() PayloadKind { return PayloadMCP }
func (MCPPayload) isPayload()        {}

// ToolSearchPayload carries the arguments of a tool_search_call.
type ToolSearchPayload struct {
	// Arguments is the raw JSON arguments object ({"query","limit"}); it
	// may be invalid.
	Arguments string
}

// Kind returns PayloadToolSearch.
func (ToolSearchPayload) Kind() PayloadKind { return PayloadToolSearch }
func (ToolSearchPayload) isPayload()        {}

// Call is one tool call as the model emitted it.
type Call struct {
	// CallID pairs the call with its output item.
	CallID string
	// Namespace is the tool's namespace, "" for top-level tools.
	Namespace string
	// Name is the tool name (without the namespace).
	Name string
	// Payload is what the model sent.
	Payload Payload
}

// DisplayName returns the name used in messages: "ns.name" for namespaced
// tools, otherwise the plain name.
func (c Call) DisplayName() string { return displayName(c.Namespace, c.Name) }

func displayName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "." + name
}

// Event is a turn-scoped notification a handler asks the client to see,
// e.g. turn/plan/updated. The handler knows neither its thread nor its
// turn id; the turns layer asks the event for its params with both.
type Event interface {
	// Method is the app-server notification method, e.g. "turn/plan/updated".
	Method() string
	// Params returns the notification's params for the given thread and
	// turn: the typed value clients get (an api notification struct), so
	// that it is encoded once, as every other notification is.
	Params(threadID, turnID string) any
}

// Emitter delivers handler events to the client. The turns layer implements
// it; handlers never learn about threads or connections.
type Emitter interface {
	// Emit sends ev to the clients watching the turn. It must not block on a
	// slow client.
	Emit(ctx context.Context, ev Event)
}

// EmitterFunc adapts a function to the Emitter interface.
type EmitterFunc func(ctx context.Context, ev Event)

// Emit calls f(ctx, ev).
func (f EmitterFunc) Emit(ctx context.Context, ev Event) { f(ctx, ev) }

// TurnContext is the per-turn information a handler may read.
type TurnContext struct {
	// TurnID identifies the turn the call belongs to.
	TurnID string
	// Cwd is the turn's working directory.
	Cwd string
	// Emitter receives handler events; nil discards them.
	Emitter Emitter
}

// Emit sends ev through the turn's emitter; it is a no-op without one.
func (t TurnContext) Emit(ctx context.Context, ev Event) {
	if t.Emitter != nil {
		t.Emitter.Emit(ctx, ev)
	}
}

// Invocation is everything a handler gets for one call.
type Invocation struct {
	Call
	// Turn is the context of the turn the call belongs to.
	Turn TurnContext
}

// Handler runs the calls of one or more tools (Codex ToolHandler).
type Handler interface {
	// Kind is the payload kind the handler accepts by default; see KindMatcher
	// for handlers that accept more than one.
	Kind() PayloadKind
	// IsMutating reports whether the call might change the user's
	// environment. It must be conservative: true when unsure, e.g. when the
	// arguments do not parse.
	IsMutating(ctx context.Context, inv Invocation) bool
	// Handle runs the call. A returned error becomes a failed output the model
	// can read and retry, unless it matches ErrFatal, which ends the turn.
	// Handle must return promptly once ctx is cancelled.
	Handle(ctx context.Context, inv Invocation) (Output, error)
}

// KindMatcher is implemented by handlers that accept more payload kinds than
// their Kind, e.g. shell (function and local_shell) or apply_patch (function
// and custom).
type KindMatcher interface {
	// MatchesKind reports whether the handler accepts p.
	MatchesKind(p Payload) bool
}

// HandlerFunc adapts a function to Handler: it accepts function payloads and
// is never mutating.
type HandlerFunc func(ctx context.Context, inv Invocation) (Output, error)

// Kind returns PayloadFunction.
func (HandlerFunc) Kind() PayloadKind { return PayloadFunction }

// IsMutating returns false.
func (HandlerFunc) IsMutating(context.Context, Invocation) bool { return false }

// Handle calls f(ctx, inv).
func (f HandlerFunc) Handle(ctx context.Context, inv Invocation) (Output, error) {
	return f(ctx, inv)
}

// matchesKind applies the handler's KindMatcher, or the default rule that a
// handler accepts exactly its own kind.
func matchesKind(h Handler, p Payload) bool {
	if p == nil {
		return false
	}
	if m, ok := h.(KindMatcher); ok {
		return m.MatchesKind(p)
	}
	return h.Kind() == p.Kind()
}
