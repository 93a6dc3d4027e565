package rpcws

import (
	"encoding/json"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNormalizeInboundClassifies(t *testing.T) {
	valid := []string{
		`{"id":1,"method":"m","params":{}}`,
		`{"id":-5,"method":"m"}`,
		`{"id":"x","method":"m","params":null}`,
		`{"method":"initialized"}`,
		`{"jsonrpc":"2.0","id":0,"method":"m","params":{}}`,
		`{"id":3,"result":null}`,
		`{"id":3,"result":{"ok":true}}`,
		`{"id":3,"error":{"code":-1,"message":"no"}}`,
		`  {"id":3,"result":1}  `,
	}
	for _, f := range valid {
		_, err := normalizeInbound([]byte(f))
		require.NoError(t, err, f)
	}
	invalid := []string{
		``, `null`, `[]`, `[{"id":1,"method":"m"}]`, `"s"`, `1`, `{`, `{}`,
		`{"id":7}`, `{"id":null,"method":"m"}`, `{"id":1.5,"method":"m"}`,
		`{"id":1e2,"method":"m"}`, `{"id":true,"method":"m"}`, `{"id":{},"method":"m"}`,
		`{"id":9223372036854775808,"method":"m"}`, `{"method":null}`, `{"method":1}`,
		`{"id":1,"method":"m","result":{}}`, `{"id":1,"result":{},"error":{"code":1,"message":""}}`,
		`{"id":1,"error":{"message":"no code"}}`, `{"result":{}}`,
	}
	for _, f := range invalid {
		_, err := normalizeInbound([]byte(f))
		require.Error(t, err, f)
	}
}

// TestIDsSurviveJSONRPC2 decodes through jsonrpc2's own types and encodes
// a reply back, as the connection does, and checks the id is unchanged.
func TestIDsSurviveJSONRPC2(t *testing.T) {
	for _, id := range []string{`0`, `-1`, `-9223372036854775808`, `9223372036854775807`, `"a"`, `""`, `"n:1"`, `"s:"`} {
		in, err := normalizeInbound([]byte(`{"id":` + id + `,"method":"m","params":{}}`))
		require.NoError(t, err)
		var req jsonrpc2.Request
		require.NoError(t, json.Unmarshal(in, &req))
		resp := &jsonrpc2.Response{ID: req.ID}
		require.NoError(t, resp.SetResult(map[string]int{"x": 1}))
		raw, err := json.Marshal(resp)
		require.NoError(t, err)
		out, err := normalizeOutbound(raw)
		require.NoError(t, err)
		require.JSONEq(t, `{"id":`+id+`,"result":{"x":1}}`, string(out))
		require.NotContains(t, string(out), "jsonrpc")
	}
}

func TestOutboundRequestsAndNotifications(t *testing.T) {
	req := &jsonrpc2.Request{Method: "item/tool/call", ID: jsonrpc2.ID{Num: 7}}
	require.NoError(t, req.SetParams(map[string]string{"callId": "c"}))
	raw, err := json.Marshal(req)
	require.NoError(t, err)
	out, err := normalizeOutbound(raw)
	require.NoError(t, err)
	require.JSONEq(t, `{"id":7,"method":"item/tool/call","params":{"callId":"c"}}`, string(out))
}

func FuzzNormalizeInbound(f *testing.F) {
	for _, s := range []string{`{"id":1,"method":"m","params":{}}`, `{"id":"x","result":null}`, `{"method":"n"}`, `{"id":-1,"error":{"code":1,"message":"m"}}`, `[]`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := normalizeInbound(data)
		if err != nil {
			return
		}
		// Whatever is accepted must decode as jsonrpc2 does in the read loop,
		// and a request's reply must carry back the original id.
		var probe struct {
			ID     json.RawMessage `json:"id"`
			Method *string         `json:"method"`
		}
		if err := json.Unmarshal(out, &probe); err != nil {
			t.Fatalf("accepted frame does not re-decode: %v", err)
		}
		if probe.Method == nil || probe.ID == nil {
			return
		}
		var req jsonrpc2.Request
		if err := json.Unmarshal(out, &req); err != nil {
			t.Fatalf("jsonrpc2 rejects accepted request %s: %v", out, err)
		}
		raw, _ := json.Marshal(&jsonrpc2.Response{ID: req.ID, Error: &jsonrpc2.Error{Code: 1}})
		back, err := normalizeOutbound(raw)
		if err != nil {
			t.Fatalf("reply does not encode: %v", err)
		}
		var orig, echoed struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(data, &orig)
		_ = json.Unmarshal(back, &echoed)
		var a, b any
		_ = json.Unmarshal(orig.ID, &a)
		_ = json.Unmarshal(echoed.ID, &b)
		if a != b {
			t.Fatalf("id %s came back as %s", orig.ID, echoed.ID)
		}
	})
}

// TestResponsesAcceptWhatJSONRPC2Accepted checks the ids of responses
// taken by OnResponse: what normalizeInbound lets through and jsonrpc2's
// unsigned ids decode.
func TestResponsesAcceptWhatJSONRPC2Accepted(t *testing.T) {
	for id, want := range map[string]jsonrpc2.ID{
		`0`: {Num: 0}, `7`: {Num: 7}, `9223372036854775807`: {Num: 9223372036854775807},
		`"x"`: {Str: "x", IsString: true}, `""`: {IsString: true}, `"\u00e9"`: {Str: "é", IsString: true},
	} {
		m, err := parseInbound([]byte(`{"id":` + id + `,"result":{"a":1}}`))
		require.NoError(t, err)
		resp, err := m.response()
		require.NoError(t, err, id)
		require.Equal(t, want, resp.ID, id)
		require.Equal(t, `{"a":1}`, string(resp.Result))
		require.Nil(t, resp.Error)
	}
	for _, id := range []string{`-1`, `-0`, `9223372036854775808`, `18446744073709551616`, `1.0`, `1e2`, `true`, `{}`, `null`} {
		m, err := parseInbound([]byte(`{"id":` + id + `,"result":{}}`))
		require.NoError(t, err)
		_, err = m.response()
		require.Error(t, err, id)
	}
	m, err := parseInbound([]byte(`{"id":3,"error":{"code":-32000,"message":"m","data":{"x":1}}}`))
	require.NoError(t, err)
	resp, err := m.response()
	require.NoError(t, err)
	require.Equal(t, &jsonrpc2.Error{Code: -32000, Message: "m"}, resp.Error)
	require.Nil(t, resp.Result)
}
