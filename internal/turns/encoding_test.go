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
	want, err := json.Marshal(turnMeta{History: r.history})
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(r.metaJSON()))
	var back turnMeta
	require.NoError(t, json.Unmarshal(r.metaJSON(), &back))
	require.Equal(t, r.history, back.History)
}

func TestHistoryEncodingsFollowTheHistory(t *testing.T) {
	prior := []model.InputItem{model.UserMessage("earlier <turn>"), model.AssistantMessage("ok & done")}
	r := &turnRun{at: &activeTurn{settings: turnSettings{developer: "dev notes"}}, prior: prior}
	for _, it := range prior {
		w, err := model.WireJSON(it)
		require.NoError(t, err)
		r.priorWire = append(r.priorWire, w)
	}
	r.addHistory(model.UserMessage("now"))
	r.addHistory(
		model.InputItem{Type: model.ItemFunctionCall, ID: "fc_1", CallID: "c1", Name: "a", Arguments: `{}`},
		model.InputItem{Type: model.ItemFunctionCall, ID: "fc_2", CallID: "c2", Name: "b", Arguments: `{"x":1}`},
		model.InputItem{Type: "web_search_call", ID: "ws_1", Raw: json.RawMessage(`{"type":"web_search_call","id":"ws_1","status":"completed"}`)},
	)
	requireEncodingsMatch(t, r)
	// A preempted response's calls leave the history, and their encodings
	// with them.
	r.dropCalls([]model.InputItem{{Type: model.ItemFunctionCall, CallID: "c1"}})
	requireEncodingsMatch(t, r)
	require.Len(t, r.history, 3)
	r.addHistory(model.FunctionCallOutput("c2", "result"))
	requireEncodingsMatch(t, r)

	// Without encodings for the prior history, the client encodes it all.
	r.priorWire = nil
	_, wire := r.requestInput()
	require.Nil(t, wire)
}
