package rpcws

import (
	"encoding/json"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// requestViaMarshal is a server request framed by encoding/json: the
// bytes EncodeRequest must give. Invalid UTF-8 in the method comes out as
// literal U+FFFD, as frames always had it.
func requestViaMarshal(t testing.TB, id int64, method string, params any) ([]byte, error) {
	var p json.RawMessage
	if params != nil {
		var err error
		if p, err = json.Marshal(params); err != nil {
			return nil, err
		}
	}
	out, err := json.Marshal(struct {
		ID     int64           `json:"id"`
		Method json.RawMessage `json:"method"`
		Params json.RawMessage `json:"params,omitempty"`
	}{id, literalMethod(t, method), p})
	if err != nil {
		t.Fatalf("encoding failed: %v", err)
	}
	return out, nil
}

// literalMethod encodes method as json.Marshal does, except that each
// invalid byte becomes a literal U+FFFD instead of the escape \ufffd.
func literalMethod(t testing.TB, method string) json.RawMessage {
	enc, err := json.Marshal(string([]rune(method)))
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// notificationViaMarshal is how a notification was framed before
// EncodeNotification.
func notificationViaMarshal(method string, params any, at int64) ([]byte, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Method      string          `json:"method"`
		Params      json.RawMessage `json:"params"`
		EmittedAtMs int64           `json:"emittedAtMs"`
	}{method, p, at})
}

type marshalsBadly struct{}

func (marshalsBadly) MarshalJSON() ([]byte, error) { return []byte(`{`), nil }

var encodeCases = []struct {
	name   string
	method string
	params any
}{
	{"struct", "item/tool/call", struct {
		ThreadID  string          `json:"threadId"`
		Namespace *string         `json:"namespace"`
		Arguments json.RawMessage `json:"arguments"`
	}{"th", nil, json.RawMessage("{ \"city\" : \"<Paris & co>\",\n \"n\": [1, 2.50] }")}},
	{"escapes", "m", map[string]string{"s": "<a href=\"x\">&amp;</a> \u2028\u2029 \x01 \t\n é 😀 \xff"}},
	{"nil params", "m", nil},
	{"typed nil", "m", (*struct{})(nil)},
	{"raw null", "m", json.RawMessage("null")},
	{"string", "m", "plain"},
	{"method needing escapes", "a<b>&\"c\"\\é\x7f", map[string]int{"x": 1}},
	{"empty object", "thread/started", struct{}{}},
}

func TestEncodeRequestMatchesMarshal(t *testing.T) {
	for _, tc := range encodeCases {
		for _, id := range []int64{0, 1, 42, 1 << 40, -1, -9223372036854775808, 9223372036854775807} {
			want, werr := requestViaMarshal(t, id, tc.method, tc.params)
			got, gerr := EncodeRequest(id, tc.method, tc.params)
			require.NoError(t, werr, tc.name)
			require.NoError(t, gerr, tc.name)
			require.Equal(t, string(want), string(got), "%s, id %d", tc.name, id)
		}
	}
	_, err := EncodeRequest(1, "m", marshalsBadly{})
	require.Error(t, err)
}

func TestEncodeNotificationMatchesMarshal(t *testing.T) {
	for _, tc := range encodeCases {
		for _, at := range []int64{0, 1_700_000_000_123, -5} {
			want, werr := notificationViaMarshal(tc.method, tc.params, at)
			got, gerr := EncodeNotification(tc.method, tc.params, at)
			require.NoError(t, werr, tc.name)
			require.NoError(t, gerr, tc.name)
			require.Equal(t, string(want), string(got), tc.name)
		}
	}
	_, err := EncodeNotification("m", marshalsBadly{}, 0)
	require.Error(t, err)
	_, err = EncodeNotification("m", func() {}, 0)
	require.Error(t, err)
}

// A notification frame is one line that starts with its method, however
// its params were given: the embedded store keeps the frames of a commit's
// events in one row joined by newlines, and reads each one's method from
// its start (internal/store/internal/backend/eventrows.go).
func TestEncodeNotificationIsOneLine(t *testing.T) {
	params := map[string]any{
		"text": "two\nlines\r\n",
		"raw":  json.RawMessage("{\n  \"a\": [1,\n 2]\n}"),
		"list": []string{"\n"},
	}
	frame, err := EncodeNotification("item/agentMessage/delta", params, 1)
	require.NoError(t, err)
	require.NotContains(t, string(frame), "\n")
	require.True(t, strings.HasPrefix(string(frame), `{"method":"item/agentMessage/delta",`), string(frame))
}

func FuzzEncodeMatchesMarshal(f *testing.F) {
	f.Add("item/tool/call", `{"a":"<b>"}`, "x", int64(3))
	f.Add("m\u2028", `[1, 2 ,3]`, "\xff\xfe", int64(-1))
	f.Fuzz(func(t *testing.T, method, raw, s string, n int64) {
		params := map[string]any{"s": s, "n": n}
		if json.Valid([]byte(raw)) {
			params["raw"] = json.RawMessage(raw)
		}
		want, err := requestViaMarshal(t, n, method, params)
		require.NoError(t, err)
		got, err := EncodeRequest(n, method, params)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
		want, err = notificationViaMarshal(method, params, n)
		require.NoError(t, err)
		got, err = EncodeNotification(method, params, n)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	})
}

// A large frame is encoded into a buffer of its size and handed over, not
// copied out of it: encoding it allocates about its size once (and what
// encoding/json allocates for itself), not twice. The frames handed over
// stay intact while the encoder is reused.
func TestLargeFrameNotCopied(t *testing.T) {
	const size = 4 << 20
	params := map[string]string{"text": strings.Repeat("x", size)}
	other := map[string]string{"text": strings.Repeat("y", size)}
	best := uint64(math.MaxUint64)
	var first []byte
	for range 4 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f, err := EncodeNotification("item/completed", params, 1)
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		best = min(best, after.TotalAlloc-before.TotalAlloc)
		if first == nil {
			first = f
		}
		_, err = EncodeNotification("item/completed", other, 1)
		require.NoError(t, err)
	}
	want, err := notificationViaMarshal("item/completed", params, 1)
	require.NoError(t, err)
	require.Equal(t, string(want), string(first))
	if raceEnabled {
		t.Skip("allocations are not counted in race builds")
	}
	// encoding/json's own buffer is pooled (by it) after the first run.
	require.Less(t, best, uint64(size*3/2), "encoding a %d-byte frame allocated %d bytes", size, best)
}
