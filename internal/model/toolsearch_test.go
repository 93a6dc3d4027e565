package model_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/model"
)

// A tool_search_call carries its arguments as an object, not a string: it
// decodes (call id and arguments at hand) and is replayed as it came,
// without its upstream id; so is the tool_search_output answering it.
func TestToolSearchItems(t *testing.T) {
	const call = `{"type":"tool_search_call","id":"tsc_1","call_id":"call_s","execution":"client","arguments":{"query":"calendar","limit":2},"status":"completed"}`
	var it model.InputItem
	require.NoError(t, json.Unmarshal([]byte(call), &it))
	require.Equal(t, model.ItemToolSearchCall, it.Type)
	require.Equal(t, "call_s", it.CallID)
	require.JSONEq(t, `{"query":"calendar","limit":2}`, it.Arguments)
	full, wire := model.EncodeItem(it)
	require.JSONEq(t, call, string(full))
	require.JSONEq(t, `{"type":"tool_search_call","call_id":"call_s","execution":"client","arguments":{"query":"calendar","limit":2},"status":"completed"}`, string(wire))

	const out = `{"type":"tool_search_output","call_id":"call_s","status":"completed","execution":"client","tools":[{"type":"namespace","name":"mcp__cal__","description":"d","tools":[]}]}`
	require.NoError(t, json.Unmarshal([]byte(out), &it))
	require.Equal(t, model.ItemToolSearchOutput, it.Type)
	require.Equal(t, "call_s", it.CallID)
	_, wire = model.EncodeItem(it)
	require.JSONEq(t, out, string(wire))

	// A function call's arguments stay a string.
	require.NoError(t, json.Unmarshal([]byte(`{"type":"function_call","call_id":"c","name":"f","arguments":"{\"a\":1}"}`), &it))
	require.Equal(t, `{"a":1}`, it.Arguments)
	require.Error(t, json.Unmarshal([]byte(`{"type":"function_call","call_id":"c","name":"f","arguments":{"a":1}}`), &it))
}
