package turns

import (
	"encoding/json"

	"github.com/appserver/appserver/internal/model"
)

// addHistory appends items to the turn's history with their encodings.
func (r *turnRun) addHistory(items ...model.InputItem) {
	for _, it := range items {
		r.history = append(r.history, it)
		stored, wire := model.EncodeItem(it)
		r.histStored = append(r.histStored, stored)
		r.histWire = append(r.histWire, wire)
	}
}

// metaJSON is the turn meta ({"history":[...]}) built from the items'
// stored encodings.
func (r *turnRun) metaJSON() json.RawMessage {
	size := 16
	for _, s := range r.histStored {
		size += len(s) + 1
	}
	b := make([]byte, 0, size)
	b = append(b, `{"history":[`...)
	for i, s := range r.histStored {
		if i > 0 {
			b = append(b, ',')
		}
		if s == nil {
			var err error
			if s, err = json.Marshal(r.history[i]); err != nil {
				panic(err)
			}
		}
		b = append(b, s...)
	}
	return append(b, "]}"...)
}

func (r *turnRun) dropCalls(calls []model.InputItem) {
	if len(calls) == 0 {
		return
	}
	drop := map[string]bool{}
	for _, c := range calls {
		drop[c.CallID] = true
	}
	kept := r.history[:0]
	stored, wire := r.histStored[:0], r.histWire[:0]
	for i, it := range r.history {
		if isToolCall(it) && drop[it.CallID] {
			continue
		}
		kept = append(kept, it)
		stored, wire = append(stored, r.histStored[i]), append(wire, r.histWire[i])
	}
	r.history, r.histStored, r.histWire = kept, stored, wire
}

// closeDanglingCalls answers tool calls that never got an output (a turn
// interrupted mid-call, or a daemon that died), so that replayed history
// is always well-formed for the model API.
func closeDanglingCalls(items []model.InputItem) []model.InputItem {
	answered := map[string]bool{}
	for _, it := range items {
		if it.Type == model.ItemFunctionCallOutput || it.Type == model.ItemCustomToolCallOutput {
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
		}
	}
	return out
}
