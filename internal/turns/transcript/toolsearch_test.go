package transcript

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/model"
	"github.com/appserver/appserver/internal/registry"
)

// A tool_search_call cut short (interrupt, crash) is answered on reload
// with an empty tool_search_output, the only output such a call takes;
// one already answered is left alone.
func TestCloseDanglingToolSearchCall(t *testing.T) {
	var call, answered model.InputItem
	require.NoError(t, json.Unmarshal([]byte(`{"type":"tool_search_call","call_id":"call_s","execution":"client","arguments":{"query":"x"}}`), &call))
	require.NoError(t, json.Unmarshal([]byte(`{"type":"tool_search_call","call_id":"call_t","execution":"client","arguments":{"query":"y"}}`), &answered))
	out := ResponseItemToModel(registry.ResponseItem{Type: registry.ToolSearchOutput, CallID: "call_t"})
	items := closeDanglingCalls([]model.InputItem{call, answered, out})
	require.Len(t, items, 4)
	_, wire := model.EncodeItem(items[3])
	require.JSONEq(t, `{"type":"tool_search_output","call_id":"call_s","status":"completed","execution":"client","tools":[]}`, string(wire))
}
