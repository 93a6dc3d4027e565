package rpcws

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/api"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// classify decodes one frame as the connection does and returns the
// request or the response it holds.
func classify(frame []byte) (*Request, *response, error) {
	var e envelope
	if err := scanEnvelope(frame, &e); err != nil {
		return nil, nil, err
	}
	if e.method == nil {
		resp, err := e.response()
		return nil, resp, err
	}
	req := new(Request)
	return req, nil, e.request(req)
}

func TestFramesClassified(t *testing.T) {
	valid := []string{
		`{"id":1,"method":"m","params":{}}`,
		`{"id":-5,"method":"m"}`,
		`{"id":-0,"method":"m"}`,
		`{"id":"x","method":"m","params":null}`,
		`{"method":"initialized"}`,
		`{"jsonrpc":"2.0","id":0,"method":"m","params":{}}`,
		`{"id":3,"result":null}`,
		`{"id":3,"result":{"ok":true}}`,
		`{"id":3,"error":{"code":-1,"message":"no"}}`,
		`  {"id":3,"result":1}  `,
		"\v{\"id\":3,\"result\":1}", // not JSON whitespace: left to encoding/json's path, as before
		`{"ID":1,"Method":"m"}`,     // encoding/json matches keys in any case
		`{"id":1,"method":"a","method":"m"}`,
	}
	for _, f := range valid {
		_, _, err := classify([]byte(f))
		require.NoError(t, err, f)
	}
	invalid := []string{
		``, `null`, `[]`, `[{"id":1,"method":"m"}]`, `"s"`, `1`, `{`, `{}`,
		`{"id":7}`, `{"id":null,"method":"m"}`, `{"id":1.5,"method":"m"}`,
		`{"id":1e2,"method":"m"}`, `{"id":true,"method":"m"}`, `{"id":{},"method":"m"}`,
		`{"id":9223372036854775808,"method":"m"}`, `{"id":-9223372036854775809,"method":"m"}`,
		`{"method":null}`, `{"method":1}`,
		`{"id":1,"method":"m","result":{}}`, `{"id":1,"result":{},"error":{"code":1,"message":""}}`,
		`{"id":1,"error":{"message":"no code"}}`, `{"id":1,"error":null}`, `{"result":{}}`,
		`{"id":1,"method":"m"} x`,
	}
	for _, f := range invalid {
		_, _, err := classify([]byte(f))
		require.Error(t, err, f)
	}
	req, _, err := classify([]byte(`{"id":1,"Method":"a","method":"m","params":{"threadId":"t","input":[]}}`))
	require.NoError(t, err)
	require.Equal(t, "m", req.Method, "the last of the keys encoding/json matches wins")
	require.Equal(t, `{"threadId":"t","input":[]}`, string(req.Params))
	_, ok := req.Members()
	require.True(t, ok)
}

// replyID encodes the reply to a request with the given id and returns the
// id as written in the reply.
func replyID(t *testing.T, id string) string {
	t.Helper()
	req, _, err := classify([]byte(`{"id":` + id + `,"method":"m","params":{}}`))
	require.NoError(t, err, id)
	e := getEncoder()
	defer putEncoder(e)
	require.NoError(t, appendID(e, req.rawID))
	return e.buf.String()
}

func TestReplyIDsAsWritten(t *testing.T) {
	for _, id := range []string{`0`, `-0`, `-1`, `-9223372036854775808`, `9223372036854775807`, `"a"`, `""`, `"n:1"`, `"s:"`, `"0194f0d2-7c1e"`} {
		require.Equal(t, id, replyID(t, id))
	}
	// Strings with escapes, non-ASCII or characters encoding/json escapes
	// come back as encoding/json writes their value.
	for id, want := range map[string]string{
		`"\u0061"`: `"a"`, `"<&>"`: `"\u003c\u0026\u003e"`, `"é"`: `"é"`, `"\/"`: `"/"`,
		"\"\xff\"": `"` + "\ufffd" + `"`, `"\ud800"`: `"` + "\ufffd" + `"`, `"\u2028"`: `"\u2028"`,
	} {
		require.Equal(t, want, replyID(t, id), id)
	}
}

// TestResponsesAcceptTheirIDs checks the ids of client responses: strings
// and integers in [0, MaxInt64] (the server's own ids are never negative).
func TestResponsesAcceptTheirIDs(t *testing.T) {
	for id, want := range map[string]api.RequestID{
		`0`: api.IntRequestID(0), `7`: api.IntRequestID(7), `9223372036854775807`: api.IntRequestID(9223372036854775807),
		`"x"`: api.StringRequestID("x"), `""`: api.StringRequestID(""), `"\u00e9"`: api.StringRequestID("é"),
	} {
		_, resp, err := classify([]byte(`{"id":` + id + `,"result":{"a":1}}`))
		require.NoError(t, err, id)
		require.Equal(t, want, resp.id, id)
		require.Equal(t, `{"a":1}`, string(resp.result))
		require.Nil(t, resp.err)
	}
	for _, id := range []string{`-1`, `-0`, `9223372036854775808`, `18446744073709551616`, `1.0`, `1e2`, `true`, `{}`, `null`} {
		_, _, err := classify([]byte(`{"id":` + id + `,"result":{}}`))
		require.Error(t, err, id)
	}
	_, resp, err := classify([]byte(`{"id":3,"error":{"code":-32000,"message":"m","data":{"x":1}}}`))
	require.NoError(t, err)
	require.Equal(t, &Error{Code: -32000, Message: "m"}, resp.err)
	require.Nil(t, resp.result)
}

// FuzzEnvelopeMatchesEncodingJSON holds the strict scan to what
// encoding/json's struct decoding of the envelope finds: the same frames
// accepted, the same members, and for requests the ids and methods it
// decoded.
func FuzzEnvelopeMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{`{"id":1,"method":"m","params":{}}`, `{"id":"x","result":null}`, `{"method":"n"}`,
		`{"id":-1,"error":{"code":1,"message":"m"}}`, `[]`, `{`, `{"ID":1,"method":"m"}`, `{"id":1,"id":2,"method":"m"}`,
		`{"id":"\u00e9","method":"a\u0062","params":{"threadId":"t"}}`, "{\"id\":1,\"method\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast, slow envelope
		ferr := scanEnvelope(data, &fast)
		serr := decodeEnvelope(data, &slow)
		if (ferr == nil) != (serr == nil) {
			t.Fatalf("scan: %v, encoding/json: %v", ferr, serr)
		}
		if ferr != nil {
			return
		}
		for i, pair := range [][2][]byte{{fast.id, slow.id}, {fast.method, slow.method}, {fast.params, slow.params}, {fast.result, slow.result}, {fast.err, slow.err}} {
			if (pair[0] == nil) != (pair[1] == nil) || !bytes.Equal(pair[0], pair[1]) {
				t.Fatalf("member %s: scan %q, encoding/json %q", envelopeNames[i], pair[0], pair[1])
			}
		}
		if fast.method == nil {
			return
		}
		var req Request
		if fast.request(&req) != nil {
			return
		}
		var method string
		if err := json.Unmarshal(fast.method, &method); err != nil || method != req.Method {
			t.Fatalf("method %q decoded as %q (%v)", fast.method, req.Method, err)
		}
		if req.rawID != nil {
			var id api.RequestID
			if err := json.Unmarshal(req.rawID, &id); err != nil || id != req.ID() {
				t.Fatalf("id %s decoded as %+v (%v)", req.rawID, req.ID(), err)
			}
		}
	})
}
