package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// Object accepts exactly the objects encoding/json accepts (short of
// MaxDepth) and splits them as encoding/json does.
func FuzzObject(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":[]}`, `{"a":[1,-0.5e+3,true,false,null,"x\"\\\/\b\f\n\r\t\u00ff"]}`,
		`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":tru}`, `{"a":"\x"}`, `{"a":"\u12"}`,
		`{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":1}}`, `[1]`, `"s"`, "{\"a\":\"\x01\"}", `{"a":{"b":[{"c":{}}]}}`,
		`{"k\"ey":1,"k":2,"k":3}`, "{\"a\":\"\xff\"}", `{"ſ":1,"é":2}`,
		`{"type":"response.completed","response":{"id":"r","usage":{"input_tokens":3},"error":null}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		members, ok := Object(data, nil)
		trimmed := bytes.TrimLeft(data, " \t\r\n")
		isObject := json.Valid(data) && len(trimmed) > 0 && trimmed[0] == '{'
		if ok != isObject {
			if !ok && jsonDepth(data) > MaxDepth {
				return
			}
			t.Fatalf("Object(%q) ok=%v, encoding/json says %v", data, ok, isObject)
		}
		if !ok {
			return
		}
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(data, &m))
		last := map[string][]byte{}
		for _, mb := range members {
			require.True(t, json.Valid(mb.Value), "%q", mb.Value)
			var key string
			require.NoError(t, json.Unmarshal(append(append([]byte{'"'}, mb.Key...), '"'), &key))
			if mb.Plain {
				require.Equal(t, string(mb.Key), key)
				require.True(t, utf8.ValidString(key) && len(key) == len([]rune(key)), "%q is not plain", key)
			}
			last[key] = mb.Value
		}
		require.Len(t, last, len(m))
		for k, v := range m {
			require.Equal(t, string(v), string(last[k]), "member %q of %q", k, data)
		}
	})
}

// jsonDepth is the deepest nesting of valid JSON data.
func jsonDepth(data []byte) int {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return deepest
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
				deepest = max(deepest, depth)
			} else {
				depth--
			}
		}
	}
}
