package dynamic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/registry"
)

// ItemSink publishes the dynamicToolCall item of a call to the turn the
// call belongs to; it is the part of the turns layer's ToolSink this
// package uses. ItemStarted sends item/started ({item, threadId, turnId,
// startedAtMs}) to the thread's subscribers; ItemCompletedFinal commits the
// final item to the store, with the rest of its tool round when the call is
// the round's last, then sends item/completed ({item, threadId, turnId,
// contentTokenCount:null, completedAtMs}). The item carries its StartedAtMs
// / CompletedAtMs. Neither may block on a slow client, and the commit is not
// cancelled by the turn's interruption.
type ItemSink interface {
	// ItemStarted announces the item in its inProgress state.
	ItemStarted(item api.ThreadItem)
	// ItemCompletedFinal persists and announces the item in its final
	// state; a dynamic call announces nothing after its item.
	ItemCompletedFinal(item api.ThreadItem)
}

// HandlerConfig configures the Handler of one thread.
type HandlerConfig struct {
	// ThreadID is the thread whose calls the handler serves.
	ThreadID string
	// Tools are the thread's registered tools.
	Tools *Tools
	// Broker forwards the calls; required.
	Broker *Broker
	// Items publishes the dynamicToolCall items; nil discards them.
	Items ItemSink
	// Now is the clock of item timestamps and durations; nil uses time.Now.
	Now func() time.Time
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// Handler is the registry.Handler serving every dynamic tool of one thread
// (register it with Tools.AddTo). Calls are mutating and function-payload
// only. It is safe for concurrent use.
type Handler struct {
	threadID string
	tools    *Tools
	broker   *Broker
	items    ItemSink
	now      func() time.Time
	log      *slog.Logger
}

var _ registry.Handler = (*Handler)(nil)

// NewHandler returns the handler of one thread.
func NewHandler(cfg HandlerConfig) *Handler {
	h := &Handler{threadID: cfg.ThreadID, tools: cfg.Tools, broker: cfg.Broker, items: cfg.Items, now: cfg.Now, log: cfg.Logger}
	if h.now == nil {
		h.now = time.Now
	}
	if h.log == nil {
		h.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return h
}

// Kind returns registry.PayloadFunction.
func (h *Handler) Kind() registry.PayloadKind { return registry.PayloadFunction }

// IsMutating returns true: a client tool may do anything (docs/tools.md §1.8).
func (h *Handler) IsMutating(context.Context, registry.Invocation) bool { return true }

// Handle runs one call:
//
//  1. the arguments are parsed ("" counts as {}) and validated against the
//     tool's registered schema; a failure is returned as a retryable error
//     for the model ("failed to parse function arguments: …" or "invalid
//     arguments for <tool>: …") and the client is not asked;
//  2. item/started for a dynamicToolCall item (inProgress, contentItems and
//     success null);
//  3. the call goes through the broker (item/tool/call to a client);
//  4. item/completed with status completed (success:true) or failed, the
//     contentItems, success and durationMs; a call that ended without an
//     answer completes failed with success:false, and contentItems [] when
//     cancelled or the error text otherwise;
//  5. the client's contentItems become the output (see OutputOf); a call
//     without an answer returns the broker's *CallError, whose message the
//     model reads.
func (h *Handler) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	fp, ok := inv.Payload.(registry.FunctionPayload)
	if !ok {
		return registry.Output{}, errors.New("dynamic tool handler received unsupported payload")
	}
	tool, ok := h.tools.Lookup(inv.Namespace, inv.Name)
	if !ok {
		return registry.Output{}, errors.New("unsupported call: " + inv.DisplayName())
	}
	args, value, err := parseArguments(fp.Arguments)
	if err != nil {
		h.broker.metrics.CallCompleted(OutcomeInvalidArguments, 0)
		return registry.Output{}, registry.ArgumentsError(err)
	}
	if err := tool.ValidateArguments(value); err != nil {
		h.broker.metrics.CallCompleted(OutcomeInvalidArguments, 0)
		h.log.Debug("dynamic tool arguments rejected", slog.String("thread_id", h.threadID),
			slog.String("call_id", inv.CallID), slog.String("tool", tool.DisplayName()), slog.Any("error", err))
		return registry.Output{}, err
	}

	turnID := inv.Turn.TurnID
	started := h.now()
	startedMs := started.UnixMilli()
	item := api.DynamicToolCallItem{ID: inv.CallID, Tool: tool.Name, Arguments: args, Status: api.StatusInProgress}
	if tool.Namespace != "" {
		item.Namespace = new(tool.Namespace)
	}
	if h.items != nil {
		startItem := item
		h.items.ItemStarted(api.ThreadItem{Body: &startItem, StartedAtMs: &startedMs})
	}

	res, callErr := h.broker.Call(ctx, CallRequest{
		ThreadID:  h.threadID,
		TurnID:    turnID,
		CallID:    inv.CallID,
		Namespace: tool.Namespace,
		Tool:      tool.Name,
		Arguments: args,
	})

	finished := h.now()
	completedMs := finished.UnixMilli()
	duration := finished.Sub(started).Milliseconds()
	item.DurationMs = &duration
	var success bool
	if callErr == nil {
		success = res.Success
		item.ContentItems = []api.DynamicToolCallOutputContentItem(res.ContentItems)
		if item.ContentItems == nil {
			item.ContentItems = []api.DynamicToolCallOutputContentItem{}
		}
	} else {
		item.ContentItems = []api.DynamicToolCallOutputContentItem{}
		var ce *CallError
		if errors.As(callErr, &ce) && ce.Outcome != OutcomeCancelled && ce.Outcome != OutcomeSuperseded && ce.Outcome != OutcomeClosed {
			item.ContentItems = append(item.ContentItems, api.DynamicToolCallOutputContentItem{Type: api.ContentInputText, Text: ce.Message})
		}
	}
	item.Success = &success
	item.Status = api.StatusFailed
	if success {
		item.Status = api.StatusCompleted
	}
	if h.items != nil {
		h.items.ItemCompletedFinal(api.ThreadItem{Body: &item, StartedAtMs: &startedMs, CompletedAtMs: &completedMs})
	}
	if callErr != nil {
		return registry.Output{}, callErr
	}
	return OutputOf(res), nil
}

// parseArguments parses the model's arguments string; blank means {}. It
// returns the compacted JSON and the decoded value (numbers as json.Number).
func parseArguments(arguments string) (json.RawMessage, any, error) {
	raw := bytes.TrimSpace([]byte(arguments))
	if len(raw) == 0 {
		return json.RawMessage("{}"), map[string]any{}, nil
	}
	d := valueDecoder{data: raw}
	value, ok := d.document()
	switch {
	case !ok:
		var err error
		if value, err = decodeJSONValueStd(raw); err != nil {
			return nil, nil, err
		}
	case !d.spaced:
		// Already compact, as models usually write arguments: raw is
		// its own compaction.
		return json.RawMessage(raw), value, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := json.Compact(&buf, raw); err != nil {
		return nil, nil, err
	}
	return json.RawMessage(buf.Bytes()), value, nil
}
