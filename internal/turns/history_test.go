package turns

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/model"
)

// requireEncodingsMatch checks that the cached encodings of a turn's
// history are exactly what encoding the items afresh gives.
func requireEncodingsMatch(t *testing.T, r *turnRun) {
	t.Helper()
	input, wire := r.requestInput()
	require.NotNil(t, wire, "every item has its encoding")
	require.Len(t, wire, len(input))
	for i, it := range input {
		want, err := model.WireJSON(it)
		require.NoError(t, err)
		require.Equal(t, string(want), string(wire[i]), "item %d", i)
	}
	requireMetaMatches(t, &r.hist)
}

// requireMetaMatches checks the turn meta built from cached encodings
// against encoding the items afresh.
func requireMetaMatches(t *testing.T, h *history) {
	t.Helper()
	want, err := json.Marshal(turnMeta{History: h.items})
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(h.metaJSON()))
	var back turnMeta
	require.NoError(t, json.Unmarshal(h.metaJSON(), &back))
	require.Equal(t, h.items, back.History)
}

func TestHistoryEncodingsFollowTheHistory(t *testing.T) {
	var prior history
	prior.addUnencoded(model.UserMessage("earlier <turn>"), model.AssistantMessage("ok & done"))
	prior.ensureWire()
	r := &turnRun{at: &activeTurn{settings: turnSettings{developer: "dev notes"}}, prior: prior.snapshot()}
	r.hist.add(model.UserMessage("now"))
	r.hist.add(
		model.InputItem{Type: model.ItemFunctionCall, ID: "fc_1", CallID: "c1", Name: "a", Arguments: `{}`},
		model.InputItem{Type: model.ItemFunctionCall, ID: "fc_2", CallID: "c2", Name: "b", Arguments: `{"x":1}`},
		model.InputItem{Type: "web_search_call", ID: "ws_1", Raw: json.RawMessage(`{"type":"web_search_call","id":"ws_1","status":"completed"}`)},
	)
	requireEncodingsMatch(t, r)
	// A preempted response's calls leave the history, and their encodings
	// with them.
	r.hist.dropCalls([]model.InputItem{{Type: model.ItemFunctionCall, CallID: "c1"}})
	requireEncodingsMatch(t, r)
	require.Len(t, r.hist.items, 3)
	r.hist.add(model.FunctionCallOutput("c2", "result"))
	requireEncodingsMatch(t, r)

	// Without encodings for the prior history, the client encodes it all.
	r.prior.wire = nil
	_, wire := r.requestInput()
	require.Nil(t, wire)
}

func TestHistoryMetaEncodesWhatIsNotCached(t *testing.T) {
	var h history
	h.add(model.UserMessage("cached"))
	h.addUnencoded(model.AssistantMessage("read back from the store"))
	h.add(model.InputItem{Type: model.ItemFunctionCall, ID: "fc_1", CallID: "c1", Name: "a", Arguments: `{}`})
	requireMetaMatches(t, &h)
	require.False(t, h.wireComplete())
	h.ensureWire()
	require.True(t, h.wireComplete())
	for i, it := range h.items {
		want, err := model.WireJSON(it)
		require.NoError(t, err)
		require.Equal(t, string(want), string(h.wire[i]), "item %d", i)
	}
}

func TestHistoryAppendTurnClosesDanglingCalls(t *testing.T) {
	var thread history
	thread.add(model.UserMessage("first"))
	var turn history
	turn.add(
		model.UserMessage("second"),
		model.InputItem{Type: model.ItemFunctionCall, ID: "fc_1", CallID: "done", Name: "a", Arguments: `{}`},
		model.FunctionCallOutput("done", "ok"),
		model.InputItem{Type: model.ItemCustomToolCall, ID: "ct_1", CallID: "cut", Name: "b", Input: "x"},
	)
	thread.appendTurn(turn)
	require.Len(t, thread.items, 6)
	require.Equal(t, model.CustomToolCallOutput("cut", "aborted"), thread.items[5], "the interrupted call is answered")
	require.True(t, thread.wireComplete(), "encodings stay complete")
	for i, it := range thread.items {
		want, err := model.WireJSON(it)
		require.NoError(t, err)
		require.Equal(t, string(want), string(thread.wire[i]), "item %d", i)
	}

	// A thread history without every encoding drops them, to be made
	// again when the next turn starts.
	thread.addUnencoded(model.UserMessage("from the store"))
	thread.appendTurn(turn)
	require.False(t, thread.wireComplete())
	thread.ensureWire()
	require.True(t, thread.wireComplete())
}

func TestHistorySnapshotIsNotWrittenThrough(t *testing.T) {
	// Room to grow in place, as a long thread's history usually has.
	h := history{items: make([]model.InputItem, 0, 8)}
	h.add(model.UserMessage("a"), model.UserMessage("b"))
	snap := h.snapshot()
	h.add(model.UserMessage("thread grows"))
	snap.add(model.UserMessage("turn grows"))
	require.Equal(t, model.UserMessage("thread grows"), h.items[2])
	require.Len(t, snap.items, 3)
	require.Equal(t, model.UserMessage("turn grows"), snap.items[2])
}
