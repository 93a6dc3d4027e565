package server_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// goldenCall is one line of a capture of plain requests
// (testdata/golden/reference/*_capture.js): a request, and the
// reference's result or error to it; exp says whether the connection had
// the experimental API.
type goldenCall struct {
	Exp *bool              `json:"exp"`
	Req [2]json.RawMessage `json:"req"`
	Res json.RawMessage    `json:"res"`
	Err *apptest.RPCError  `json:"err"`
}

// readGoldenCalls reads a capture of plain requests, one per line.
func readGoldenCalls(t *testing.T, name string) []goldenCall {
	t.Helper()
	data, err := os.ReadFile("testdata/golden/reference/" + name)
	require.NoError(t, err)
	var out []goldenCall
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var c goldenCall
		require.NoError(t, json.Unmarshal([]byte(line), &c), line)
		out = append(out, c)
	}
	return out
}

// method is the call's method name.
func (c goldenCall) method() string {
	var m string
	_ = json.Unmarshal(c.Req[0], &m)
	return m
}

// String is the request as captured, for messages.
func (c goldenCall) String() string { return string(c.Req[0]) + " " + string(c.Req[1]) }

// sendGolden sends the request exactly as captured (params left out when
// they were null) and returns its answer.
func sendGolden(c *apptest.Client, call goldenCall) apptest.Frame {
	c.T.Helper()
	var params any
	if p := strings.TrimSpace(string(call.Req[1])); p != "null" && p != "" {
		params = call.Req[1]
	}
	return c.ResponseTo(c.Request(call.method(), params))
}

// rpcOf is a client of d initialized as the TUI, with or without the
// experimental API.
func rpcOf(t *testing.T, d *apptest.Daemon, experimental bool) *apptest.Client {
	t.Helper()
	c := apptest.MustDial(t, d.Addr, nil)
	c.Initialize(map[string]any{"experimentalApi": experimental})
	return c
}

// requireAnswerMatches holds an answer to the reference's: the same
// result, or an error with the same code, message and data.
func requireAnswerMatches(t *testing.T, want goldenCall, got apptest.Frame) {
	t.Helper()
	if want.Err != nil {
		require.NotNil(t, got.Error, "%s: want error %q, got result %s", want, want.Err.Message, got.Result)
		require.Equal(t, want.Err.Code, got.Error.Code, "%s", want)
		require.Equal(t, want.Err.Message, got.Error.Message, "%s", want)
		if len(want.Err.Data) > 0 {
			require.JSONEq(t, string(want.Err.Data), string(got.Error.Data), "%s", want)
		}
		return
	}
	require.Nil(t, got.Error, "%s: want result %s", want, want.Res)
	require.JSONEq(t, string(want.Res), string(got.Result), "%s", want)
}

// requireErrorMessage checks that an answer is a -32600 with message msg,
// where appserver knowingly answers otherwise than the reference.
func requireErrorMessage(t *testing.T, c goldenCall, got apptest.Frame, msg string) {
	t.Helper()
	require.NotNil(t, got.Error, "%s: want error %q, got result %s", c, msg, got.Result)
	require.Equal(t, -32600, got.Error.Code, "%s", c)
	require.Equal(t, msg, got.Error.Message, "%s", c)
}
