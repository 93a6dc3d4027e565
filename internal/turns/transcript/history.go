package transcript

import (
	"bytes"
	"encoding/json"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/registry"
)

// History is a run of model input items with their two encodings, each
// made once: stored, as the turn meta persists it ({"history":[...]}), and
// wire, as the item goes upstream in every later request. A turn's own
// additions keep both; a thread's finished history keeps only wire (its
// stored form is in its turns' records).
//
// The encodings run parallel to Items. A nil entry, or a slice shorter
// than Items, means an encoding is not at hand: a stored one is then made
// on demand, and without every wire encoding the model client encodes the
// request itself. Neither case is an error, only slower. Items and Wire
// are read by the agent loop; they change only through the methods.
type History struct {
	Items  []model.InputItem
	stored []json.RawMessage
	Wire   []json.RawMessage
	// Replaces is set on a turn's additions once the turn compacted the
	// context: its items are then the whole history from there on, and
	// what came before is no longer sent to the model. The turn meta
	// keeps the flag, so that a reload rebuilds the same history.
	Replaces bool
	// Root is the turn's rootTurnId when another turn led to it (a
	// sub-agent's turn names its parent's): "" for a turn that is its own
	// root. The turn meta keeps it first, so that reading a turn finds it
	// without decoding the history (rootTurnOf).
	Root string
	// Usage is the sum of the token usage of a turn's model responses
	// (AddUsage), kept in its meta for the turn's readers; nil before
	// its first response.
	Usage *api.TokenUsageBreakdown
}

// AddUsage adds a model response's token usage to the turn's.
func (h *History) AddUsage(u api.TokenUsageBreakdown) {
	if h.Usage == nil {
		h.Usage = &api.TokenUsageBreakdown{}
	}
	SumUsage(h.Usage, u)
}

// SumUsage adds u to total.
func SumUsage(total *api.TokenUsageBreakdown, u api.TokenUsageBreakdown) {
	total.TotalTokens += u.TotalTokens
	total.InputTokens += u.InputTokens
	total.CachedInputTokens += u.CachedInputTokens
	total.CacheWriteInputTokens += u.CacheWriteInputTokens
	total.OutputTokens += u.OutputTokens
	total.ReasoningOutputTokens += u.ReasoningOutputTokens
}

// Add appends items with both their encodings.
func (h *History) Add(items ...model.InputItem) {
	// Keep the encodings parallel to the items after addUnencoded.
	h.stored = pad(h.stored, len(h.Items))
	h.Wire = pad(h.Wire, len(h.Items))
	for _, it := range items {
		stored, wire := model.EncodeItem(it)
		h.Items = append(h.Items, it)
		h.stored = append(h.stored, stored)
		h.Wire = append(h.Wire, wire)
	}
}

// AddUnencoded appends items read back from the store; their wire
// encodings are made when a turn needs them (EnsureWire).
func (h *History) AddUnencoded(items ...model.InputItem) {
	h.Items = append(h.Items, items...)
}

// WireComplete reports whether every item has its wire encoding.
func (h *History) WireComplete() bool {
	if len(h.Wire) != len(h.Items) {
		return false
	}
	for _, w := range h.Wire {
		if w == nil {
			return false
		}
	}
	return true
}

// EnsureWire makes the wire encodings that are not at hand.
func (h *History) EnsureWire() {
	if h.WireComplete() {
		return
	}
	h.Wire = pad(h.Wire, len(h.Items))
	for i, it := range h.Items {
		if h.Wire[i] == nil {
			h.Wire[i], _ = model.WireJSON(it)
		}
	}
}

// pad extends encodings with nil entries to length n.
func pad(encodings []json.RawMessage, n int) []json.RawMessage {
	for len(encodings) < n {
		encodings = append(encodings, nil)
	}
	return encodings
}

// Snapshot returns a view of the history a running turn can read while the
// thread keeps the original: its slices are capped at their length, so an
// append to either never writes into the other's items.
func (h *History) Snapshot() History {
	return History{
		Items: h.Items[:len(h.Items):len(h.Items)],
		Wire:  h.Wire[:len(h.Wire):len(h.Wire)],
	}
}

// MetaJSON is the turn meta ({"history":[...]}, with "compacted":true
// when the history replaces the one before it and the turn's "usage" once
// it has one) built from the items' stored encodings.
func (h *History) MetaJSON() json.RawMessage {
	size := 16
	for _, s := range h.stored {
		size += len(s) + 1
	}
	b := make([]byte, 0, size+len(`"compacted":true,`)+len(rootKey)+len(h.Root)+2)
	b = append(b, '{')
	if h.Root != "" {
		// Turn ids are UUIDs: nothing to escape.
		b = append(append(append(b, rootKey...), h.Root...), `",`...)
	}
	if h.Replaces {
		b = append(b, `"compacted":true,`...)
	}
	if h.Usage != nil {
		u, err := json.Marshal(h.Usage)
		if err != nil {
			panic(err) // plain data: cannot fail
		}
		b = append(append(append(b, `"usage":`...), u...), ',')
	}
	b = append(b, `"history":[`...)
	for i, it := range h.Items {
		if i > 0 {
			b = append(b, ',')
		}
		var s json.RawMessage
		if i < len(h.stored) {
			s = h.stored[i]
		}
		if s == nil {
			var err error
			if s, err = json.Marshal(it); err != nil {
				panic(err) // plain data: cannot fail
			}
		}
		b = append(b, s...)
	}
	return append(b, "]}"...)
}

// rootKey opens the turn meta of a turn another turn led to.
const rootKey = `"rootTurnId":"`

// rootTurnOf returns the rootTurnId a stored turn meta records, or "" when
// the turn is its own root.
func rootTurnOf(meta json.RawMessage) string {
	rest, ok := bytes.CutPrefix(meta, []byte("{"+rootKey))
	if !ok {
		return ""
	}
	id, _, ok := bytes.Cut(rest, []byte(`"`))
	if !ok {
		return ""
	}
	return string(id)
}

// DropCalls removes the given tool calls, with their encodings.
func (h *History) DropCalls(calls []model.InputItem) {
	if len(calls) == 0 {
		return
	}
	drop := map[string]bool{}
	for _, c := range calls {
		drop[c.CallID] = true
	}
	kept := h.Items[:0]
	stored, wire := h.stored[:0], h.Wire[:0]
	for i, it := range h.Items {
		if IsToolCall(it) && drop[it.CallID] {
			continue
		}
		kept = append(kept, it)
		if i < len(h.stored) {
			stored = append(stored, h.stored[i])
		}
		if i < len(h.Wire) {
			wire = append(wire, h.Wire[i])
		}
	}
	h.Items, h.stored, h.Wire = kept, stored, wire
}

// IsToolCall reports whether a model output item calls a tool (a call
// that is answered by an output item of its own).
func IsToolCall(it model.InputItem) bool {
	return it.Type == model.ItemFunctionCall || it.Type == model.ItemCustomToolCall || it.Type == model.ItemToolSearchCall
}

// AppendTurn adds a finished turn's history, its dangling tool calls
// answered "aborted" (closeDanglingCalls), or puts it in place of the
// history when the turn compacted it. The wire encodings stay complete
// when both sides' are.
func (h *History) AppendTurn(turn History) {
	closed := closeDanglingCalls(turn.Items)
	if turn.Replaces {
		*h = History{}
	}
	if h.WireComplete() && turn.WireComplete() {
		h.Wire = append(h.Wire, turn.Wire...)
		// closeDanglingCalls only appends.
		for _, it := range closed[len(turn.Items):] {
			w, _ := model.WireJSON(it)
			h.Wire = append(h.Wire, w)
		}
	} else {
		h.Wire = nil
	}
	h.Items = append(h.Items, closed...)
}

// closeDanglingCalls answers tool calls that never got an output (a turn
// interrupted mid-call, or a daemon that died), so that replayed history
// is always well-formed for the model API. It only appends to items.
func closeDanglingCalls(items []model.InputItem) []model.InputItem {
	answered := map[string]bool{}
	for _, it := range items {
		if it.Type == model.ItemFunctionCallOutput || it.Type == model.ItemCustomToolCallOutput || it.Type == model.ItemToolSearchOutput {
			answered[it.CallID] = true
		}
	}
	out := items
	for _, it := range items {
		if answered[it.CallID] {
			continue
		}
		switch it.Type {
		case model.ItemFunctionCall:
			out = append(out, model.FunctionCallOutput(it.CallID, "aborted"))
		case model.ItemCustomToolCall:
			out = append(out, model.CustomToolCallOutput(it.CallID, "aborted"))
		case model.ItemToolSearchCall:
			// A search has no text to answer with: it found nothing.
			out = append(out, ResponseItemToModel(registry.ResponseItem{Type: registry.ToolSearchOutput, CallID: it.CallID}))
		}
	}
	return out
}
