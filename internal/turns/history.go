package turns

import (
	"bytes"
	"encoding/json"

	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/registry"
)

// history is a run of model input items with their two encodings, each
// made once: stored, as the turn meta persists it ({"history":[...]}), and
// wire, as the item goes upstream in every later request. A turn's own
// additions keep both; a thread's finished history keeps only wire (its
// stored form is in its turns' records).
//
// The encodings run parallel to items. A nil entry, or a slice shorter
// than items, means an encoding is not at hand: a stored one is then made
// on demand, and without every wire encoding the model client encodes the
// request itself. Neither case is an error, only slower.
type history struct {
	items  []model.InputItem
	stored []json.RawMessage
	wire   []json.RawMessage
	// replaces is set on a turn's additions once the turn compacted the
	// context: its items are then the whole history from there on, and
	// what came before is no longer sent to the model. The turn meta
	// keeps the flag, so that a reload rebuilds the same history.
	replaces bool
	// root is the turn's rootTurnId when another turn led to it (a
	// sub-agent's turn names its parent's): "" for a turn that is its own
	// root. The turn meta keeps it first, so that reading a turn finds it
	// without decoding the history (rootTurnOf).
	root string
}

// add appends items with both their encodings.
func (h *history) add(items ...model.InputItem) {
	// Keep the encodings parallel to the items after addUnencoded.
	h.stored = pad(h.stored, len(h.items))
	h.wire = pad(h.wire, len(h.items))
	for _, it := range items {
		stored, wire := model.EncodeItem(it)
		h.items = append(h.items, it)
		h.stored = append(h.stored, stored)
		h.wire = append(h.wire, wire)
	}
}

// addUnencoded appends items read back from the store; their wire
// encodings are made when a turn needs them (ensureWire).
func (h *history) addUnencoded(items ...model.InputItem) {
	h.items = append(h.items, items...)
}

// wireComplete reports whether every item has its wire encoding.
func (h *history) wireComplete() bool {
	if len(h.wire) != len(h.items) {
		return false
	}
	for _, w := range h.wire {
		if w == nil {
			return false
		}
	}
	return true
}

// ensureWire makes the wire encodings that are not at hand.
func (h *history) ensureWire() {
	if h.wireComplete() {
		return
	}
	h.wire = pad(h.wire, len(h.items))
	for i, it := range h.items {
		if h.wire[i] == nil {
			h.wire[i], _ = model.WireJSON(it)
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

// snapshot returns a view of the history a running turn can read while the
// thread keeps the original: its slices are capped at their length, so an
// append to either never writes into the other's items.
func (h *history) snapshot() history {
	return history{
		items: h.items[:len(h.items):len(h.items)],
		wire:  h.wire[:len(h.wire):len(h.wire)],
	}
}

// metaJSON is the turn meta ({"history":[...]}, with "compacted":true
// when the history replaces the one before it) built from the items'
// stored encodings.
func (h *history) metaJSON() json.RawMessage {
	size := 16
	for _, s := range h.stored {
		size += len(s) + 1
	}
	b := make([]byte, 0, size+len(`"compacted":true,`)+len(rootKey)+len(h.root)+2)
	b = append(b, '{')
	if h.root != "" {
		// Turn ids are UUIDs: nothing to escape.
		b = append(append(append(b, rootKey...), h.root...), `",`...)
	}
	if h.replaces {
		b = append(b, `"compacted":true,`...)
	}
	b = append(b, `"history":[`...)
	for i, it := range h.items {
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

// dropCalls removes the given tool calls, with their encodings.
func (h *history) dropCalls(calls []model.InputItem) {
	if len(calls) == 0 {
		return
	}
	drop := map[string]bool{}
	for _, c := range calls {
		drop[c.CallID] = true
	}
	kept := h.items[:0]
	stored, wire := h.stored[:0], h.wire[:0]
	for i, it := range h.items {
		if isToolCall(it) && drop[it.CallID] {
			continue
		}
		kept = append(kept, it)
		if i < len(h.stored) {
			stored = append(stored, h.stored[i])
		}
		if i < len(h.wire) {
			wire = append(wire, h.wire[i])
		}
	}
	h.items, h.stored, h.wire = kept, stored, wire
}

// appendTurn adds a finished turn's history, its dangling tool calls
// answered "aborted" (closeDanglingCalls), or puts it in place of the
// history when the turn compacted it. The wire encodings stay complete
// when both sides' are.
func (h *history) appendTurn(turn history) {
	closed := closeDanglingCalls(turn.items)
	if turn.replaces {
		*h = history{}
	}
	if h.wireComplete() && turn.wireComplete() {
		h.wire = append(h.wire, turn.wire...)
		// closeDanglingCalls only appends.
		for _, it := range closed[len(turn.items):] {
			w, _ := model.WireJSON(it)
			h.wire = append(h.wire, w)
		}
	} else {
		h.wire = nil
	}
	h.items = append(h.items, closed...)
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
			out = append(out, responseItemToModel(registry.ResponseItem{Type: registry.ToolSearchOutput, CallID: it.CallID}))
		}
	}
	return out
}
