package store_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

func TestValidatePayload(t *testing.T) {
	const thread = "0190a5b2-0000-7000-8000-000000000001"
	tests := []struct {
		payload string
		code    apperr.Code
	}{
		{`{"text":"hi"}`, ""},
		{`{"text":"\u0001 is fine"}`, ""},
		{`{"text":"\\u0000 is a literal backslash-u"}`, ""},
		{`{"text":"\\\\u0000 too"}`, ""},
		// NUL inside an object: stored with the SQL backends' escape.
		{`{"text":"\u0000"}`, ""},
		{`{"text":"\\\u0000"}`, ""},
		{`{"text":"ok","more":["\u0000"]}`, ""},
		// NUL in a JSON value that is no object: refused.
		{`"\u0000"`, apperr.Invalid},
		{` ["\u0000"]`, apperr.Invalid},
		// The escape's mark is the store's alone.
		{`{"appserver:nul":1,"text":"a"}`, apperr.Invalid},
		{`{"nested":{"appserver:nul":1}}`, ""},
		{`{"text":`, apperr.Invalid},
		{``, apperr.Invalid},
		{`null`, ""},
	}
	for _, tc := range tests {
		b := &store.Batch{AppendItems: []*store.Item{{
			ThreadID: thread, TurnID: "t", ItemID: "i", Type: "agentMessage", Payload: json.RawMessage(tc.payload),
		}}}
		require.Equal(t, tc.code, apperr.CodeOf(b.Validate()), "payload %s", tc.payload)
	}
}

func TestValidateReferences(t *testing.T) {
	tests := []struct {
		name string
		b    store.Batch
		code apperr.Code
	}{
		{"thread id not a UUID", store.Batch{CreateThreads: []*store.Thread{{ID: "t1"}}}, apperr.Invalid},
		{"nil thread", store.Batch{CreateThreads: []*store.Thread{nil}}, apperr.Invalid},
		{"patch of a non-UUID is not found", store.Batch{UpdateThreads: []store.ThreadPatch{{ID: "t1"}}}, apperr.NotFound},
		{"turn status", store.Batch{CreateTurns: []*store.Turn{{ThreadID: "0190a5b2-0000-7000-8000-000000000001", ID: "x", Status: "running"}}}, apperr.Invalid},
		{"item without turn", store.Batch{AppendItems: []*store.Item{{ThreadID: "0190a5b2-0000-7000-8000-000000000001", ItemID: "i", Type: "x", Payload: json.RawMessage(`{}`)}}}, apperr.Invalid},
		{"NUL in cwd", store.Batch{CreateThreads: []*store.Thread{{ID: "0190a5b2-0000-7000-8000-000000000001", Cwd: "/a\x00"}}}, apperr.Invalid},
		{"valid", store.Batch{CreateThreads: []*store.Thread{{ID: "0190A5B2-0000-7000-8000-000000000001"}}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.code, apperr.CodeOf(tc.b.Validate()))
		})
	}
}

// TestValidateMessages pins the wording of validation errors, which reach
// clients; each names the record and the field at fault.
func TestValidateMessages(t *testing.T) {
	const thread = "0190a5b2-0000-7000-8000-000000000001"
	bad := json.RawMessage(`{"a":`)
	nul := json.RawMessage(`"\u0000"`)
	tests := []struct {
		b   store.Batch
		msg string
	}{
		{store.Batch{CreateThreads: []*store.Thread{{ID: thread, Preview: "a\x00"}}}, "thread " + thread + ": text contains a NUL character"},
		{store.Batch{CreateThreads: []*store.Thread{{ID: thread, Meta: bad}}}, "thread " + thread + " meta is not valid JSON"},
		{store.Batch{CreateThreads: []*store.Thread{{ID: thread, Meta: nul}}}, "thread " + thread + ` meta holds a \u0000 character outside an object`},
		{store.Batch{UpdateThreads: []store.ThreadPatch{{ID: thread, Meta: bad}}}, "thread " + thread + " meta is not valid JSON"},
		{store.Batch{CreateTurns: []*store.Turn{{ThreadID: thread, ID: "t\x00", Status: store.TurnInProgress}}}, "turn t\x00: text contains a NUL character"},
		{store.Batch{CreateTurns: []*store.Turn{{ThreadID: thread, ID: "t", Status: store.TurnInProgress, Error: bad}}}, "turn t error is not valid JSON"},
		{store.Batch{UpdateTurns: []store.TurnPatch{{ThreadID: thread, ID: "t", Meta: nul}}}, `turn t meta holds a \u0000 character outside an object`},
		{store.Batch{AppendItems: []*store.Item{{ThreadID: thread, TurnID: "t", ItemID: "i", Type: "x\x00", Payload: json.RawMessage(`{}`)}}}, "item i: text contains a NUL character"},
		{store.Batch{AppendItems: []*store.Item{{ThreadID: thread, TurnID: "t", ItemID: "i", Type: "x", Payload: bad}}}, "item i payload is not valid JSON"},
		{store.Batch{AppendItems: []*store.Item{{ThreadID: thread, TurnID: "t", ItemID: "i", Type: "x"}}}, "item i: payload is empty"},
	}
	for _, tc := range tests {
		err := tc.b.Validate()
		require.Equal(t, apperr.Invalid, apperr.CodeOf(err), "want %q", tc.msg)
		var e *apperr.Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, tc.msg, e.Message)
	}
}
