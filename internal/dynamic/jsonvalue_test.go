package dynamic

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// jsonValueSamples are documents valueDecoder decodes itself, documents it
// hands to encoding/json, and malformed ones.
var jsonValueSamples = []string{
	`{"city":"Paris","days":3}`, ` { "a" : [ 1 , 2.50 , -0 , 1e2 , 1E-3 , true , false , null ] } `,
	`"é😀"`, `"esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00"`, `"\ud800"`, `"bad \xff utf8"`, "\"\x01\"",
	`{"a":1,"a":2}`, `{}`, `[]`, `[[],{}]`, `0`, `-1.5e+10`, `"plain"`, `{"k":{"k":{"k":[{}]}}}`,
	``, ` `, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `01`, `-`, `1.`, `1e`, `.5`, `+1`,
	`tru`, `truex`, `nul`, `"unterminated`, `"\x"`, `"\u12"`, `{} {}`, `1 2`, `[1]]`, `{"a":1}}`,
	"\ufeff{}", `NaN`, `{1:2}`, `{"a" 1}`, "[\"a\",\n1]",
	strings.Repeat("[", maxValueDepth) + strings.Repeat("]", maxValueDepth),
	strings.Repeat("[", maxValueDepth+1) + strings.Repeat("]", maxValueDepth+1),
}

// checkSameAsDecoder requires decodeJSONValue to agree with the
// json.Decoder on doc, value and error alike, and valueDecoder never to
// accept what the json.Decoder rejects.
func checkSameAsDecoder(t *testing.T, doc []byte) {
	want, wantErr := decodeJSONValueStd(doc)
	got, gotErr := decodeJSONValue(doc)
	if wantErr != nil {
		require.EqualError(t, gotErr, wantErr.Error(), "%q", doc)
	} else {
		require.NoError(t, gotErr, "%q", doc)
		require.Equal(t, want, got, "%q", doc)
	}
	d := valueDecoder{data: doc}
	if v, ok := d.document(); ok {
		require.NoError(t, wantErr, "valueDecoder accepted %q", doc)
		require.Equal(t, want, v, "%q", doc)
		if !d.spaced {
			var buf bytes.Buffer
			require.NoError(t, json.Compact(&buf, doc))
			require.Equal(t, string(doc), buf.String(), "document reported compact")
		}
	}
}

func TestDecodeJSONValueMatchesDecoder(t *testing.T) {
	for _, s := range jsonValueSamples {
		checkSameAsDecoder(t, []byte(s))
	}
	// The common case is decoded without encoding/json.
	d := valueDecoder{data: []byte(`{"city":"Paris","n":[1,2.5]}`)}
	_, ok := d.document()
	require.True(t, ok)
	require.False(t, d.spaced)
	d = valueDecoder{data: []byte(`{"city": "Paris"}`)}
	_, ok = d.document()
	require.True(t, ok)
	require.True(t, d.spaced)
}

func FuzzDecodeJSONValue(f *testing.F) {
	for _, s := range jsonValueSamples[:len(jsonValueSamples)-2] {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkSameAsDecoder(t, doc)
	})
}
