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
		if !agrees(t, data, '{', ok) {
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

// agrees fails t unless ok, a scan of data as an object or array (open),
// says what encoding/json says of data as one, or data is nested beyond
// MaxDepth; it returns whether data was accepted.
func agrees(t *testing.T, data []byte, open byte, ok bool) bool {
	t.Helper()
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	valid := json.Valid(data) && len(trimmed) > 0 && trimmed[0] == open
	if ok != valid && (ok || jsonDepth(data) <= MaxDepth) {
		t.Fatalf("scan of %q as %c: ok=%v, encoding/json says %v", data, open, ok, valid)
	}
	return ok
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

// Array accepts exactly the arrays encoding/json accepts (short of
// MaxDepth) and splits them into their elements.
func FuzzArray(f *testing.F) {
	for _, s := range []string{`[]`, ` [ ] `, `[1,"a",{"b":[2]},null]`, `[1,]`, `[,]`, `[1]]`, `{}`, `[01]`, "[\"\xff\"]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		elems, ok := Array(data, nil)
		if !agrees(t, data, '[', ok) {
			return
		}
		var want []json.RawMessage
		require.NoError(t, json.Unmarshal(data, &want))
		require.Len(t, elems, len(want))
		for i, e := range elems {
			require.Nil(t, e.Key)
			require.Equal(t, string(want[i]), string(e.Value))
		}
	})
}

// Text decodes a JSON string as encoding/json does, or reports false
// where encoding/json fails.
func FuzzText(f *testing.F) {
	for _, s := range []string{`""`, `"a"`, `"\u00e9\n\"\\\/"`, `"\ud83d\ude00"`, `"\ud800"`, "\"\xff\"", `"é"`, `"a`, `"a"b`, `1`, `"\x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := Text(data)
		var want string
		err := json.Unmarshal(data, &want)
		trimmed := bytes.TrimSpace(data)
		if len(trimmed) != len(data) {
			// Text takes one whole string, no whitespace around it.
			require.False(t, ok)
			return
		}
		require.Equal(t, err == nil, ok, "%q: %v", data, err)
		if ok {
			require.Equal(t, want, got)
		}
		if p, pok := PlainString(data); pok {
			require.True(t, ok)
			require.Equal(t, want, p)
		}
	})
}

func TestPick(t *testing.T) {
	names := []string{"type", "text"}
	pick := func(s string) ([][]byte, bool) {
		members, ok := Object([]byte(s), nil)
		require.True(t, ok, s)
		vals := make([][]byte, len(names))
		return vals, Pick(members, names, vals)
	}
	vals, ok := pick(`{"text":"b","other":1,"type":"a"}`)
	require.True(t, ok)
	require.Equal(t, []string{`"a"`, `"b"`}, []string{string(vals[0]), string(vals[1])})
	vals, ok = pick(`{"type":"a"}`)
	require.True(t, ok)
	require.Nil(t, vals[1])
	for _, s := range []string{
		`{"type":"a","type":"b"}`, // repeated
		`{"Type":"a"}`,            // another letter case
		`{"t\u0079pe":"a"}`,       // escaped
		`{"ſ":1}`,                 // non-ASCII, which encoding/json folds
	} {
		_, ok := pick(s)
		require.False(t, ok, s)
	}
}

func TestObjectAt(t *testing.T) {
	doc := []byte(`[1, {"a": [2], "b\u0041": "x"} , {"c":}]`)
	end, members, ok := ObjectAt(doc, 4, nil)
	require.True(t, ok)
	require.Equal(t, `{"a": [2], "b\u0041": "x"}`, string(doc[4:end]))
	require.Len(t, members, 2)
	require.Equal(t, "a", string(members[0].Key))
	require.Equal(t, "[2]", string(members[0].Value))
	require.True(t, members[0].Plain)
	require.False(t, members[1].Plain)

	_, _, ok = ObjectAt(doc, 1, nil) // not an object
	require.False(t, ok)
	_, _, ok = ObjectAt(doc, strings.LastIndexByte(string(doc), '{'), nil) // not valid
	require.False(t, ok)
	_, _, ok = ObjectAt(doc, len(doc), nil)
	require.False(t, ok)
}

func TestObjectFuncAndArrayAt(t *testing.T) {
	doc := []byte(` {"a": [1, {"b": 2}], "c\u0041": "x"} `)
	var keys []string
	members, ok := ObjectFunc(doc, nil, func(key, b []byte, i int) (int, bool) {
		keys = append(keys, string(key))
		return Value(b, i)
	})
	require.True(t, ok)
	want, _ := Object(doc, nil)
	require.Equal(t, want, members)
	require.Equal(t, []string{"a", `c\u0041`}, keys)

	_, ok = ObjectFunc(doc, nil, func(key, b []byte, i int) (int, bool) { return i, string(key) != "a" })
	require.False(t, ok, "a value read refuses the document")
	_, ok = ObjectFunc([]byte(`{"a":`), nil, func(_, b []byte, i int) (int, bool) { return Value(b, i) })
	require.False(t, ok)

	arr := []byte(`[1, {"b": 2}] tail`)
	n := 0
	end, ok := ArrayAt(arr, 0, func(key, b []byte, i int) (int, bool) {
		require.Nil(t, key)
		n++
		return Value(b, i)
	})
	require.True(t, ok)
	require.Equal(t, 2, n)
	require.Equal(t, "[1, {\"b\": 2}]", string(arr[:end]))
	_, ok = ArrayAt(arr, 1, nil)
	require.False(t, ok, "not an array")
	_, ok = ArrayAt([]byte(`[1,]`), 0, func(_, b []byte, i int) (int, bool) { return Value(b, i) })
	require.False(t, ok, "a trailing comma")
}
