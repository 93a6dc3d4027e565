package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/server/rpcws"
)

// callFor returns the Call a connection would make of params: its request
// decoded from a frame, with the params' members.
func callFor(t testing.TB, method string, params []byte) (*Call, bool) {
	t.Helper()
	frame := append([]byte(`{"id":1,"method":"`+method+`","params":`), params...)
	frame = append(frame, '}')
	req, err := rpcws.DecodeRequest(frame)
	if err != nil {
		return nil, false
	}
	return &Call{Session: &Session{}, Method: method, Params: req.Params, req: req}, true
}

// The checks that read the members found by the scan agree with the
// encoding/json decodes they replace: the resource key, the gate on
// experimental fields and the required fields, on the same params.
func checkParamsAgree(t testing.TB, method string, params []byte) {
	c, ok := callFor(t, method, params)
	if !ok {
		return
	}
	if got, want := resourceKey(c.req), decodeResourceKey(c.req); got != want {
		t.Fatalf("resource key of %s: %q, decoded %q", params, got, want)
	}
	fast := gateFields(c)
	slow := gateFieldsDecoded(c, experimentalFields[method])
	if (fast == nil) != (slow == nil) || fast != nil && fast.Error() != slow.Error() {
		t.Fatalf("gate of %s: %v, decoded %v", params, fast, slow)
	}
	raw := c.Params
	if string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	members, known := c.members()
	for _, path := range []string{"threadId", "input", "clientInfo.name", "a.b.c"} {
		fast := requireField(raw, members, known, path)
		slow := requirePath(raw, strings.Split(path, "."))
		if (fast == nil) != (slow == nil) || fast != nil && fast.Error() != slow.Error() {
			t.Fatalf("required %s of %s: %v, decoded %v", path, params, fast, slow)
		}
	}
}

func TestParamChecksMatchDecoding(t *testing.T) {
	for _, p := range paramSeeds {
		checkParamsAgree(t, "turn/start", []byte(p))
		checkParamsAgree(t, "process/kill", []byte(p))
	}
	c, ok := callFor(t, "turn/start", []byte(`{"threadId":"t","permissions":{}}`))
	require.True(t, ok)
	require.EqualError(t, gateFields(c), "jsonrpc error -32600: turn/start.permissions requires experimentalApi capability")
	require.Equal(t, "thread:t", resourceKey(c.req))
	c, ok = callFor(t, "command/exec/write", []byte(`{"processId":"p"}`))
	require.True(t, ok)
	require.Equal(t, "process:p", resourceKey(c.req))
	c, ok = callFor(t, "process/writeStdin", []byte(`{"processHandle":"p"}`))
	require.True(t, ok)
	require.Equal(t, "processHandle:p", resourceKey(c.req))
	c, ok = callFor(t, "command/exec/write", []byte(`{"processHandle":"p"}`))
	require.True(t, ok)
	require.Equal(t, "", resourceKey(c.req), "a handle is process/*'s only")
}

var paramSeeds = []string{
	`{}`, `null`, `[]`, `"s"`, `1`,
	`{"threadId":"t","input":[]}`,
	`{"threadId":"t","threadId":"u"}`,
	`{"threadId":null,"processId":"p"}`,
	`{"threadId":5}`, `{"threadId":"t","processId":5}`,
	`{"processHandle":"h"}`, `{"processHandle":5}`, `{"processHandle":"h","processHandle":"i"}`, `{"processId":"p","processHandle":"h"}`,
	`{"THREADID":"t"}`, `{"thread\u0049d":"t"}`, `{"threadId":"t\u00e9\ud800"}`,
	`{"permissions":null,"permissions":{}}`, `{"permissions":{},"permissions":null}`,
	`{"perm\u0069ssions":true}`, `{"Permissions":true}`,
	`{"clientInfo":{"name":"x"}}`, `{"clientInfo":null}`, `{"clientInfo":"x"}`, `{"clientInfo":{"nam\u0065":1}}`,
	`{"a":{"b":{"c":1}}}`, `{"a":{"b":[]}}`, `{"a":{"b":null}}`,
}

func FuzzParamChecksMatchDecoding(f *testing.F) {
	for _, p := range paramSeeds {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, params string) {
		if !json.Valid([]byte(params)) {
			return
		}
		checkParamsAgree(t, "turn/start", []byte(params))
		checkParamsAgree(t, "command/exec/write", []byte(params))
	})
}
