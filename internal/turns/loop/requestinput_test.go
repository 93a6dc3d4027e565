package loop

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/turns/transcript"
)

// requireEncodingsMatch checks that the cached encodings of a turn's
// history are exactly what encoding the items afresh gives.
func requireEncodingsMatch(t *testing.T, r *Run) {
	t.Helper()
	input, wire := r.requestInput()
	require.NotNil(t, wire, "every item has its encoding")
	require.Len(t, wire, len(input))
	for i, it := range input {
		want, err := model.WireJSON(it)
		require.NoError(t, err)
		require.Equal(t, string(want), string(wire[i]), "item %d", i)
	}
	// The turn meta built from the cached encodings is what encoding the
	// items afresh gives.
	want, err := json.Marshal(transcript.TurnMeta{History: r.hist.Items})
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(r.hist.MetaJSON()))
}

func TestHistoryEncodingsFollowTheHistory(t *testing.T) {
	var prior transcript.History
	prior.AddUnencoded(model.UserMessage("earlier <turn>"), model.AssistantMessage("ok & done"))
	prior.EnsureWire()
	r := &Run{at: &Turn{Settings: Settings{Developer: "dev notes"}}, prior: prior.Snapshot()}
	r.hist.Add(model.UserMessage("now"))
	r.hist.Add(
		model.InputItem{Type: model.ItemFunctionCall, ID: "fc_1", CallID: "c1", Name: "a", Arguments: `{}`},
		model.InputItem{Type: model.ItemFunctionCall, ID: "fc_2", CallID: "c2", Name: "b", Arguments: `{"x":1}`},
		model.InputItem{Type: "web_search_call", ID: "ws_1", Raw: json.RawMessage(`{"type":"web_search_call","id":"ws_1","status":"completed"}`)},
	)
	requireEncodingsMatch(t, r)
	// A preempted response's calls leave the history, and their encodings
	// with them.
	r.hist.DropCalls([]model.InputItem{{Type: model.ItemFunctionCall, CallID: "c1"}})
	requireEncodingsMatch(t, r)
	require.Len(t, r.hist.Items, 3)
	r.hist.Add(model.FunctionCallOutput("c2", "result"))
	requireEncodingsMatch(t, r)

	// Without encodings for the prior history, the client encodes it all.
	r.prior.Wire = nil
	_, wire := r.requestInput()
	require.Nil(t, wire)
}

// A turn builds its requests in the slices the thread's last turn handed
// back, and its end hands them back empty, keeping no item alive.
func TestRequestBuffersGoFromTurnToTurn(t *testing.T) {
	var prior transcript.History
	for range 20 {
		prior.AddUnencoded(model.UserMessage("question"), model.AssistantMessage("answer"))
	}
	prior.EnsureWire()
	first := &Run{at: &Turn{}, prior: prior.Snapshot()}
	first.hist.Add(model.UserMessage("now"))
	input, wire := first.requestInput()
	require.Len(t, input, 41)
	require.Len(t, wire, 41)

	in, w := (&End{r: first}).RequestBuffers()
	require.Empty(t, in)
	require.Empty(t, w)
	require.GreaterOrEqual(t, cap(in), 41)
	for _, it := range in[:41] {
		require.Zero(t, it, "no item kept alive")
	}
	for _, raw := range w[:41] {
		require.Nil(t, raw)
	}
	again, _ := (&End{r: first}).RequestBuffers()
	require.Nil(t, again, "handed back once")

	second := &Run{at: &Turn{}, prior: prior.Snapshot()}
	second.UseRequestBuffers(in, w)
	second.hist.Add(model.UserMessage("next"))
	input2, wire2 := second.requestInput()
	require.Len(t, input2, 41)
	require.Same(t, &in[:1][0], &input2[0], "built in the handed-over slice")
	require.Same(t, &w[:1][0], &wire2[0])
	require.Equal(t, "next", input2[40].Content[0].Text)
	requireEncodingsMatch(t, second)
}
