package store_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/store"
)

func TestEscapeNUL(t *testing.T) {
	tests := []struct{ in, stored string }{
		// Nothing to escape: stored as written, ␀ included.
		{`{"text":"a␀b"}`, `{"text":"a␀b"}`},
		{`{"text":"\\u0000 is literal"}`, `{"text":"\\u0000 is literal"}`},
		// NUL in values, keys and nested strings; ␀ doubled beside it.
		{`{"text":"a\u0000b"}`, `{"appserver:nul":1,"text":"a␀0b"}`},
		{`{"a":[1,{"k\u0000":"␀\u0000"}],"n":-1.5e3,"t":true,"z":null}`, `{"appserver:nul":1,"a":[1,{"k␀0":"␀␀␀0"}],"n":-1.5e3,"t":true,"z":null}`},
		{` { "html" : "<&>\u0000" } `, `{"appserver:nul":1,"html":"<&>␀0"}`},
		{`{}`, `{}`},
	}
	for _, tc := range tests {
		stored, err := store.EscapeNUL([]byte(tc.in))
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.stored, string(stored), tc.in)
		require.False(t, store.HasNULEscape(stored))
		require.JSONEq(t, tc.in, string(store.UnescapeNUL(stored)), tc.in)
	}
	_, err := store.EscapeNUL([]byte(`["\u0000"]`))
	require.Error(t, err, "only objects are escaped")
}

func TestUnescapeNUL(t *testing.T) {
	tests := []struct{ stored, read string }{
		// Unmarked values read as stored, whatever they hold.
		{`{"text":"a␀0b"}`, `{"text":"a␀0b"}`},
		{`{"nested":{"appserver:nul":1,"t":"␀0"}}`, `{"nested":{"appserver:nul":1,"t":"␀0"}}`},
		{`{"text":"\"appserver:nul\""}`, `{"text":"\"appserver:nul\""}`},
		// Postgres returns jsonb with its own member order and spacing.
		{`{"text": "a␀0b", "appserver:nul": 1}`, `{"text":"a\u0000b"}`},
		{`{"id": "x", "appserver:nul": 1, "z": ["␀␀", "␀0"]}`, `{"id":"x","z":["␀","\u0000"]}`},
	}
	for _, tc := range tests {
		require.Equal(t, tc.read, string(store.UnescapeNUL([]byte(tc.stored))), tc.stored)
	}
}

// FuzzNULEscape holds the escape to a round trip: any JSON object reads
// back as it was written, and what is stored holds no U+0000.
func FuzzNULEscape(f *testing.F) {
	for _, s := range []string{`{"a":"\u0000"}`, `{"a":"␀"}`, `{"a":["␀0","\u0000␀"],"b":{"c":"\u0000\u0000"}}`, `{"appserver:nul":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var v map[string]any
		b := &store.Batch{UpdateTurns: []store.TurnPatch{{ThreadID: "0190a5b2-0000-7000-8000-000000000001", ID: "t", Meta: json.RawMessage(in)}}}
		if json.Unmarshal([]byte(in), &v) != nil || b.Validate() != nil {
			return // what the store refuses is never stored
		}
		stored, err := store.EscapeNUL([]byte(in))
		require.NoError(t, err)
		require.False(t, store.HasNULEscape(stored), "%s stored as %s", in, stored)
		if !store.HasNULEscape([]byte(in)) {
			return // stored as written; a mark in it is the writer's own
		}
		var back map[string]any
		require.NoError(t, json.Unmarshal(store.UnescapeNUL(stored), &back))
		require.Equal(t, v, back)
	})
}
