package transcript

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/model"
)

// requireMetaMatches checks the turn meta built from cached encodings
// against encoding the items afresh.
func requireMetaMatches(t *testing.T, h *History) {
	t.Helper()
	want, err := json.Marshal(TurnMeta{History: h.Items})
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(h.MetaJSON()))
	var back TurnMeta
	require.NoError(t, json.Unmarshal(h.MetaJSON(), &back))
	require.Equal(t, h.Items, back.History)
}

func TestHistoryMetaEncodesWhatIsNotCached(t *testing.T) {
	var h History
	h.Add(model.UserMessage("cached"))
	h.AddUnencoded(model.AssistantMessage("read back from the store"))
	h.Add(model.InputItem{Type: model.ItemFunctionCall, ID: "fc_1", CallID: "c1", Name: "a", Arguments: `{}`})
	requireMetaMatches(t, &h)
	require.False(t, h.WireComplete())
	h.EnsureWire()
	require.True(t, h.WireComplete())
	for i, it := range h.Items {
		want, err := model.WireJSON(it)
		require.NoError(t, err)
		require.Equal(t, string(want), string(h.Wire[i]), "item %d", i)
	}
}

func TestHistoryAppendTurnClosesDanglingCalls(t *testing.T) {
	var thread History
	thread.Add(model.UserMessage("first"))
	var turn History
	turn.Add(
		model.UserMessage("second"),
		model.InputItem{Type: model.ItemFunctionCall, ID: "fc_1", CallID: "done", Name: "a", Arguments: `{}`},
		model.FunctionCallOutput("done", "ok"),
		model.InputItem{Type: model.ItemCustomToolCall, ID: "ct_1", CallID: "cut", Name: "b", Input: "x"},
	)
	thread.AppendTurn(turn)
	require.Len(t, thread.Items, 6)
	require.Equal(t, model.CustomToolCallOutput("cut", "aborted"), thread.Items[5], "the interrupted call is answered")
	require.True(t, thread.WireComplete(), "encodings stay complete")
	for i, it := range thread.Items {
		want, err := model.WireJSON(it)
		require.NoError(t, err)
		require.Equal(t, string(want), string(thread.Wire[i]), "item %d", i)
	}

	// A thread history without every encoding drops them, to be made
	// again when the next turn starts.
	thread.AddUnencoded(model.UserMessage("from the store"))
	thread.AppendTurn(turn)
	require.False(t, thread.WireComplete())
	thread.EnsureWire()
	require.True(t, thread.WireComplete())
}

func TestHistorySnapshotIsNotWrittenThrough(t *testing.T) {
	// Room to grow in place, as a long thread's history usually has.
	h := History{Items: make([]model.InputItem, 0, 8)}
	h.Add(model.UserMessage("a"), model.UserMessage("b"))
	snap := h.Snapshot()
	h.Add(model.UserMessage("thread grows"))
	snap.Add(model.UserMessage("turn grows"))
	require.Equal(t, model.UserMessage("thread grows"), h.Items[2])
	require.Len(t, snap.Items, 3)
	require.Equal(t, model.UserMessage("turn grows"), snap.Items[2])
}
