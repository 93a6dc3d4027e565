package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
	"github.com/appserver/appserver/internal/server"
)

// A NUL character in a param the store keeps or compares as text (a search
// term, a filter, a name, a path, metadata) is the client's error, -32602
// naming the param, before anything reaches the store.
func TestNULInTextParamsIsInvalidParams(t *testing.T) {
	b := newThreadServer(t, 1, 1, 8, nil)
	id := b.threadID
	// thread/search is experimental.
	ts := newTestServer(t, server.Config{Hub: b.h, Threads: b.m})
	b.c = apptest.MustDial(t, ts.url, nil)
	b.c.Initialize(map[string]any{"experimentalApi": true})
	cases := []struct {
		method string
		params map[string]any
		field  string
	}{
		{"thread/search", map[string]any{"searchTerm": "a\x00b"}, "searchTerm"},
		{"thread/list", map[string]any{"searchTerm": "\x00"}, "searchTerm"},
		{"thread/list", map[string]any{"cwd": []string{"/", "/a\x00"}}, "cwd"},
		{"thread/list", map[string]any{"modelProviders": []string{"\x00"}}, "modelProviders"},
		{"thread/name/set", map[string]any{"threadId": id, "name": "a\x00b"}, "name"},
		{"thread/metadata/update", map[string]any{"threadId": id, "gitInfo": map[string]any{"branch": "main\x00"}}, "gitInfo"},
		{"thread/start", map[string]any{"cwd": "/tmp/\x00"}, "cwd"},
		{"thread/start", map[string]any{"model": "a\x00b"}, "model"},
		{"thread/items/list", map[string]any{"threadId": id, "turnId": "t\x00"}, "turnId"},
		{"thread/items/read", map[string]any{"threadId": id, "turnId": "t", "itemIds": []string{"a", "b\x00"}}, "itemIds"},
		{"thread/searchOccurrences", map[string]any{"threadId": id, "searchTerm": "\x00"}, "searchTerm"},
		{"thread/search/stream", map[string]any{"searchTerm": "a\x00b"}, "searchTerm"},
		{"turn/start", map[string]any{"threadId": id, "input": []any{}, "cwd": "/\x00"}, "cwd"},
	}
	for _, tc := range cases {
		res := b.c.CallRaw(tc.method, tc.params)
		require.NotNil(t, res.Error, "%s %v", tc.method, tc.params)
		require.Equal(t, -32602, res.Error.Code, "%s: %s", tc.method, res.Error.Message)
		require.Equal(t, "Invalid params: "+tc.field+" contains a NUL character", res.Error.Message)
	}
	// The thread is as it was.
	res := b.c.CallRaw("thread/read", map[string]any{"threadId": id})
	require.Nil(t, res.Error)
	require.Contains(t, string(res.Result), `"name":null`)
	require.Contains(t, string(res.Result), `"gitInfo":null`)
}

// thread/resume's afterSeq is a position in the thread's event log: a
// negative one is the client's error, -32602, not a resume that replays
// nothing.
func TestNegativeAfterSeqIsInvalidParams(t *testing.T) {
	b := newThreadServer(t, 1, 1, 8, nil)
	ts := newTestServer(t, server.Config{Hub: b.h, Threads: b.m})
	c := apptest.MustDial(t, ts.url, nil)
	c.Initialize(map[string]any{"experimentalApi": true})
	for _, seq := range []int64{-1, -1 << 40} {
		res := c.CallRaw("thread/resume", map[string]any{"threadId": b.threadID, "afterSeq": seq, "excludeTurns": true})
		code, msg := errorOf(t, res)
		require.Equal(t, -32602, code, msg)
		require.Contains(t, msg, "afterSeq must be an event sequence number")
	}
	res := c.CallRaw("thread/resume", map[string]any{"threadId": b.threadID, "afterSeq": 0, "excludeTurns": true})
	require.Nil(t, res.Error)
}
