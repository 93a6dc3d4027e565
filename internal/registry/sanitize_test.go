package registry

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apperr"
)

// sanitizeCases has one row per rule of docs/tools.md §1.6 (plus the decode step
// of §1.5), each with its input and the expected sanitized, decoded schema.
var sanitizeCases = []struct {
	name string
	in   string
	want string
}{
	// Step 1: boolean schemas.
	{"step1 root true", `true`, `{"type":"string"}`},
	{"step1 root false", `false`, `{"type":"string"}`},
	{"step1 nested boolean property", `{"type":"object","properties":{"a":true}}`,
		`{"type":"object","properties":{"a":{"type":"string"}}}`},

	// Step 2: arrays are sanitized element by element.
	{"step2 array elements", `{"anyOf":[{},true]}`, `{"anyOf":[{"type":"string"},{"type":"string"}]}`},

	// Step 3.1: $ref.
	{"ref to $defs", `{"type":"object","properties":{"a":{"$ref":"#/$defs/X"}},"$defs":{"X":{"type":"integer","description":"an x"}}}`,
		`{"type":"object","properties":{"a":{"type":"integer","description":"an x"}}}`},
	{"ref to definitions", `{"type":"object","properties":{"a":{"$ref":"#/definitions/X"}},"definitions":{"X":{"enum":["a","b"]}}}`,
		`{"type":"object","properties":{"a":{"type":"string","enum":["a","b"]}}}`},
	{"ref to root", `{"type":"object","properties":{"self":{"$ref":"#"}}}`,
		`{"type":"object","properties":{"self":{"type":"object","properties":{"self":{"type":"object","properties":{}}}}}}`},
	{"ref pointer escapes", `{"type":"object","properties":{"a":{"$ref":"#/$defs/a~1b~0c"},"b":{"$ref":"#/$defs/sp%20ace"}},"$defs":{"a/b~c":{"type":"boolean"},"sp ace":{"type":"number"}}}`,
		`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"number"}}}`},
	{"ref pointer array index", `{"type":"object","properties":{"a":{"$ref":"#/$defs/L/1"}},"$defs":{"L":[{"type":"string"},{"type":"boolean"}]}}`,
		`{"type":"object","properties":{"a":{"type":"boolean"}}}`},
	{"ref target is boolean schema", `{"type":"object","properties":{"a":{"$ref":"#/$defs/Any","type":"integer"}},"$defs":{"Any":true}}`,
		`{"type":"object","properties":{"a":{"type":"integer"}}}`},
	{"self-referencing ref falls back to object", `{"type":"object","properties":{"root":{"$ref":"#/$defs/Node"}},"$defs":{"Node":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/Node"}}}}}}`,
		`{"type":"object","properties":{"root":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"type":"object","properties":{}}}}}}}`},
	{"cycle fallback object-like without type", `{"$ref":"#/$defs/O","$defs":{"O":{"required":["x"],"properties":{"x":{"$ref":"#/$defs/O"}}}}}`,
		`{"type":"object","required":["x"],"properties":{"x":{"type":"object","properties":{}}}}`},
	{"cycle fallback array", `{"$ref":"#/$defs/L","$defs":{"L":{"type":"array","items":{"$ref":"#/$defs/L"}}}}`,
		`{"type":"array","items":{"type":"array","items":{"type":"string"}}}`},
	{"cycle fallback number", `{"$ref":"#/$defs/N","$defs":{"N":{"type":"number","anyOf":[{"$ref":"#/$defs/N"},{"type":"null"}]}}}`,
		`{"type":"number","anyOf":[{"type":"number"},{"type":"null"}]}`},
	{"cycle fallback integer", `{"$ref":"#/$defs/I","$defs":{"I":{"type":["integer","null"],"anyOf":[{"$ref":"#/$defs/I"},{"type":"null"}]}}}`,
		`{"type":["integer","null"],"anyOf":[{"type":"integer"},{"type":"null"}]}`},
	{"cycle fallback boolean", `{"$ref":"#/$defs/B","$defs":{"B":{"type":"boolean","anyOf":[{"$ref":"#/$defs/B"},{"type":"null"}]}}}`,
		`{"type":"boolean","anyOf":[{"type":"boolean"},{"type":"null"}]}`},
	{"cycle fallback string", `{"$ref":"#/$defs/S","$defs":{"S":{"anyOf":[{"$ref":"#/$defs/S"},{"type":"null"}]}}}`,
		`{"anyOf":[{"type":"string"},{"type":"null"}]}`},
	{"cycle fallback keeps ref siblings", `{"$ref":"#/$defs/L","$defs":{"L":{"type":"array","items":{"$ref":"#/$defs/L","description":"again"}}}}`,
		`{"type":"array","items":{"type":"array","items":{"type":"string"},"description":"again"}}`},
	{"unresolvable ref falls through", `{"$ref":"#/$defs/Missing","description":"d"}`, `{"type":"string","description":"d"}`},
	{"external ref is not resolved", `{"$ref":"https://example.com/s.json","properties":{}}`, `{"type":"object","properties":{}}`},

	// $ref sibling merge rules.
	{"merge missing key copied", `{"$ref":"#/$defs/X","description":"local","$defs":{"X":{"type":"string"}}}`,
		`{"type":"string","description":"local"}`},
	{"merge equal values kept", `{"$ref":"#/$defs/X","type":"string","$defs":{"X":{"type":"string"}}}`, `{"type":"string"}`},
	{"merge other scalars keep base", `{"$ref":"#/$defs/X","description":"local","$defs":{"X":{"type":"string","description":"from def"}}}`,
		`{"type":"string","description":"from def"}`},
	{"merge required union base then new", `{"$ref":"#/$defs/X","required":["b","a"],"$defs":{"X":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}}}`,
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["a","b"]}`},
	{"merge properties per property and new", `{"$ref":"#/$defs/X","properties":{"a":{"description":"A"},"b":{"type":"number"}},"$defs":{"X":{"type":"object","properties":{"a":{"type":"string"}}}}}`,
		`{"type":"object","properties":{"a":{"type":"string","description":"A"},"b":{"type":"number"}}}`},
	{"merge type intersection", `{"$ref":"#/$defs/X","type":["string","integer"],"$defs":{"X":{"type":["integer","string","null"]}}}`,
		`{"type":["integer","string"]}`},
	{"merge empty type intersection keeps base", `{"$ref":"#/$defs/X","type":"integer","$defs":{"X":{"type":"string"}}}`,
		`{"type":"string"}`},
	{"merge additionalProperties false on overlay wins", `{"$ref":"#/$defs/X","additionalProperties":false,"$defs":{"X":{"type":"object","properties":{},"additionalProperties":{"type":"string"}}}}`,
		`{"type":"object","properties":{},"additionalProperties":false}`},
	{"merge additionalProperties false on base wins", `{"$ref":"#/$defs/X","additionalProperties":true,"$defs":{"X":{"type":"object","properties":{},"additionalProperties":false}}}`,
		`{"type":"object","properties":{},"additionalProperties":false}`},
	{"merge additionalProperties true yields other side", `{"$ref":"#/$defs/X","additionalProperties":{"type":"number"},"$defs":{"X":{"type":"object","properties":{},"additionalProperties":true}}}`,
		`{"type":"object","properties":{},"additionalProperties":{"type":"number"}}`},
	{"merge additionalProperties overlay true keeps base schema", `{"$ref":"#/$defs/X","additionalProperties":true,"$defs":{"X":{"type":"object","properties":{},"additionalProperties":{"type":"number"}}}}`,
		`{"type":"object","properties":{},"additionalProperties":{"type":"number"}}`},
	{"merge additionalProperties schemas recursively", `{"$ref":"#/$defs/X","additionalProperties":{"description":"v"},"$defs":{"X":{"type":"object","properties":{},"additionalProperties":{"type":"number"}}}}`,
		`{"type":"object","properties":{},"additionalProperties":{"type":"number","description":"v"}}`},
	{"merge other nested objects recursively", `{"$ref":"#/$defs/X","items":{"description":"elem"},"$defs":{"X":{"type":"array","items":{"type":"integer"}}}}`,
		`{"type":"array","items":{"type":"integer","description":"elem"}}`},

	// Step 3.2: single-variant combiners.
	{"oneOf single with sibling description", `{"oneOf":[{"type":"integer"}],"description":"count"}`,
		`{"type":"integer","description":"count"}`},
	{"anyOf single", `{"anyOf":[{"type":"boolean"}]}`, `{"type":"boolean"}`},
	{"allOf single", `{"allOf":[{"properties":{"a":{"type":"string"}}}],"required":["a"]}`,
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`},
	{"single combiner keeps the variant's own keys", `{"oneOf":[{"type":"string","description":"inner"}],"description":"outer"}`,
		`{"type":"string","description":"inner"}`},
	// oneOf collapses first, so the allOf variant is merged last and its
	// own keys win.
	{"single combiner checked in order oneOf anyOf allOf", `{"allOf":[{"description":"all"}],"oneOf":[{"description":"one"}]}`,
		`{"type":"string","description":"all"}`},
	{"single boolean variant", `{"anyOf":[true],"description":"d"}`, `{"type":"string","description":"d"}`},
	{"single variant with ref", `{"type":"object","properties":{"a":{"allOf":[{"$ref":"#/$defs/X"}],"description":"A"}},"$defs":{"X":{"type":"number"}}}`,
		`{"type":"object","properties":{"a":{"type":"number","description":"A"}}}`},

	// Step 3: recursion.
	{"recurse into properties", `{"properties":{"a":{},"b":{"items":{}}}}`,
		`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array","items":{"type":"string"}}}}`},
	{"recurse into items", `{"type":"array","items":{"const":1}}`, `{"type":"array","items":{"type":"string","enum":[1]}}`},
	{"recurse into additionalProperties schema", `{"type":"object","additionalProperties":{"minimum":0}}`,
		`{"type":"object","additionalProperties":{"type":"number"},"properties":{}}`},
	{"additionalProperties boolean untouched", `{"type":"object","properties":{},"additionalProperties":false}`,
		`{"type":"object","properties":{},"additionalProperties":false}`},
	{"recurse into anyOf branches", `{"anyOf":[{"properties":{}},{"items":true}]}`,
		`{"anyOf":[{"type":"object","properties":{}},{"type":"array","items":{"type":"string"}}]}`},

	// Step 4: const.
	{"const becomes enum", `{"const":"fixed"}`, `{"type":"string","enum":["fixed"]}`},
	{"const with type", `{"type":"integer","const":3}`, `{"type":"integer","enum":[3]}`},

	// Step 5: type normalization.
	{"unknown type name dropped from array", `{"type":["string","date"]}`, `{"type":"string"}`},
	{"unknown single type dropped then inferred", `{"type":"date","format":"date"}`, `{"type":"string"}`},
	{"duplicate type names collapse", `{"type":["number","number"]}`, `{"type":"number"}`},
	{"non-string type dropped", `{"type":7,"items":{}}`, `{"type":"array","items":{"type":"string"}}`},

	// Step 6: typeless anyOf.
	{"typeless anyOf stays typeless", `{"anyOf":[{"type":"string"},{"type":"number"}],"description":"d"}`,
		`{"anyOf":[{"type":"string"},{"type":"number"}],"description":"d"}`},
	{"typeless anyOf loses unknown type", `{"type":"weird","anyOf":[{"type":"string"},{"type":"null"}]}`,
		`{"anyOf":[{"type":"string"},{"type":"null"}]}`},

	// Step 7: inference.
	{"infer object from properties", `{"properties":{"a":{"type":"string"}}}`, `{"type":"object","properties":{"a":{"type":"string"}}}`},
	{"infer object from required", `{"required":["a"]}`, `{"type":"object","required":["a"],"properties":{}}`},
	{"infer object from additionalProperties", `{"additionalProperties":true}`, `{"type":"object","additionalProperties":true,"properties":{}}`},
	{"infer array from items", `{"items":{"type":"number"}}`, `{"type":"array","items":{"type":"number"}}`},
	{"infer array from prefixItems", `{"prefixItems":[{"type":"number"}]}`, `{"type":"array","items":{"type":"string"}}`},
	{"enum without type", `{"enum":["a","b"]}`, `{"type":"string","enum":["a","b"]}`},
	{"infer string from format", `{"format":"uri"}`, `{"type":"string"}`},
	{"infer number from minimum", `{"minimum":1}`, `{"type":"number"}`},
	{"infer number from maximum", `{"maximum":1}`, `{"type":"number"}`},
	{"infer number from exclusiveMinimum", `{"exclusiveMinimum":1}`, `{"type":"number"}`},
	{"infer number from exclusiveMaximum", `{"exclusiveMaximum":1}`, `{"type":"number"}`},
	{"infer number from multipleOf", `{"multipleOf":2}`, `{"type":"number"}`},
	{"infer string otherwise", `{"description":"anything"}`, `{"type":"string","description":"anything"}`},
	{"null keywords count as absent", `{"properties":null,"description":"d"}`, `{"type":"string","description":"d"}`},

	// Step 8: writing the type back.
	{"nullable union survives", `{"type":["string","null"]}`, `{"type":["string","null"]}`},
	{"integer stays integer", `{"type":"integer"}`, `{"type":"integer"}`},

	// Step 9: required children.
	{"object without properties", `{"type":"object"}`, `{"type":"object","properties":{}}`},
	{"array without items", `{"type":"array"}`, `{"type":"array","items":{"type":"string"}}`},
	{"nullable object gets properties", `{"type":["object","null"]}`, `{"type":["object","null"],"properties":{}}`},
	{"nullable array gets items", `{"type":["null","array"]}`, `{"type":["null","array"],"items":{"type":"string"}}`},
	{"null items filled", `{"type":"array","items":null}`, `{"type":"array","items":{"type":"string"}}`},

	// Multi-variant oneOf/allOf and other keywords are dropped on decode.
	{"multi oneOf and allOf dropped", `{"type":"object","properties":{},"oneOf":[{"required":["a"]},{"required":["b"]}],"allOf":[{},{}]}`,
		`{"type":"object","properties":{}}`},
	{"unsupported keywords dropped", `{"type":"string","title":"T","default":"x","minLength":1,"pattern":"^a","format":"email"}`,
		`{"type":"string"}`},
	{"nested null type allowed", `{"type":"object","properties":{"n":{"type":"null"}}}`,
		`{"type":"object","properties":{"n":{"type":"null"}}}`},
}

func TestSanitize(t *testing.T) {
	for _, tc := range sanitizeCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Sanitize(json.RawMessage(tc.in))
			require.NoError(t, err)
			b, err := json.Marshal(got)
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(b))
		})
	}
}

// TestSanitizeRaw pins rules whose effect the decode step hides: the
// sanitized value before it is decoded into Schema.
func TestSanitizeRaw(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want string
	}{
		{"recurse into prefixItems", `{"prefixItems":[true,{}]}`,
			`{"type":"array","prefixItems":[{"type":"string"},{"type":"string"}],"items":{"type":"string"}}`},
		{"merge minimum takes the larger", `{"type":"object","properties":{"n":{"$ref":"#/$defs/N","minimum":5,"exclusiveMinimum":0}},"$defs":{"N":{"type":"number","minimum":1,"exclusiveMinimum":2}}}`,
			`{"type":"object","properties":{"n":{"type":"number","minimum":5,"exclusiveMinimum":2}},"$defs":{"N":{"type":"number","minimum":1,"exclusiveMinimum":2}}}`},
		{"merge maximum takes the smaller", `{"type":"object","properties":{"n":{"$ref":"#/$defs/N","maximum":50,"exclusiveMaximum":200}},"$defs":{"N":{"type":"number","maximum":100,"exclusiveMaximum":100}}}`,
			`{"type":"object","properties":{"n":{"type":"number","maximum":50,"exclusiveMaximum":100}},"$defs":{"N":{"type":"number","maximum":100,"exclusiveMaximum":100}}}`},
		{"multi-variant oneOf and allOf are not walked", `{"type":"object","properties":{},"oneOf":[true,{}],"allOf":[true,{}]}`,
			`{"type":"object","properties":{},"oneOf":[true,{}],"allOf":[true,{}]}`},
		{"unresolvable ref is left in place", `{"$ref":"#/nowhere"}`, `{"$ref":"#/nowhere","type":"string"}`},
		{"$defs are not sanitized", `{"type":"object","properties":{},"$defs":{"X":true}}`,
			`{"type":"object","properties":{},"$defs":{"X":true}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := decodeJSON([]byte(tc.in))
			require.NoError(t, err)
			before, err := json.Marshal(v)
			require.NoError(t, err)
			got, err := json.Marshal(sanitizeValue(v))
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(got))
			after, err := json.Marshal(v)
			require.NoError(t, err)
			assert.JSONEq(t, string(before), string(after), "input must not be modified")
		})
	}
}

func TestSanitizeErrors(t *testing.T) {
	cases := []struct {
		name, in, msg string
	}{
		{"root null type", `{"type":"null"}`, "tool input schema must not be a singleton null type"},
		{"root null type in array", `{"type":["null"]}`, "tool input schema must not be a singleton null type"},
		{"invalid JSON", `{"type":`, "tool input schema is not valid JSON"},
		{"trailing data", `{} {}`, "tool input schema is not valid JSON"},
		{"root is an array", `[{"type":"string"}]`, "tool input schema is not supported"},
		{"root is JSON null", `null`, "tool input schema is not supported"},
		{"property schema is a number", `{"properties":{"a":5}}`, "tool input schema is not supported"},
		{"description is not a string", `{"type":"string","description":5}`, "tool input schema is not supported"},
		{"tuple items", `{"type":"array","items":[{"type":"string"}]}`, "tool input schema is not supported"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Sanitize(json.RawMessage(tc.in))
			require.Error(t, err)
			assert.Equal(t, apperr.Invalid, apperr.CodeOf(err))
			assert.Equal(t, tc.msg, apperr.MessageOf(err))
		})
	}
}

// TestSanitizeRefBlowupBounded feeds a chain of definitions that each
// reference the next twice (2^40 nodes if fully expanded); the expansion
// budget must keep it small.
func TestSanitizeRefBlowupBounded(t *testing.T) {
	defs := map[string]any{}
	const depth = 40
	for i := range depth {
		next := map[string]any{"$ref": "#/$defs/d" + strconv.Itoa(i+1)}
		defs["d"+strconv.Itoa(i)] = map[string]any{"type": "object", "properties": map[string]any{"a": next, "b": next}}
	}
	defs["d"+strconv.Itoa(depth)] = map[string]any{"type": "string"}
	in, err := json.Marshal(map[string]any{"$ref": "#/$defs/d0", "$defs": defs})
	require.NoError(t, err)
	got, err := Sanitize(in)
	require.NoError(t, err)
	out, err := json.Marshal(got)
	require.NoError(t, err)
	assert.Less(t, len(out), 8*maxRefNodes*10)
}

// TestSanitizeManyRefsToALargeTarget checks that refs beyond the budget are
// cheap: 20 000 refs to a 20 000-node definition.
func TestSanitizeManyRefsToALargeTarget(t *testing.T) {
	big := map[string]any{}
	for i := range 20000 {
		big["p"+strconv.Itoa(i)] = true
	}
	props := map[string]any{}
	for i := range 20000 {
		props["r"+strconv.Itoa(i)] = map[string]any{"$ref": "#/$defs/Big"}
	}
	in, err := json.Marshal(map[string]any{"type": "object", "properties": props,
		"$defs": map[string]any{"Big": map[string]any{"type": "object", "properties": big}}})
	require.NoError(t, err)
	got, err := Sanitize(in)
	require.NoError(t, err)
	require.Len(t, got.Properties, 20000)
	expanded := 0
	for _, p := range got.Properties {
		if len(p.Properties) > 0 {
			expanded++
		}
	}
	assert.Equal(t, 3, expanded, "only as many expansions as the budget allows")
}

func FuzzSanitize(f *testing.F) {
	for _, tc := range sanitizeCases {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte(`{"$ref":"#","properties":{"a":{"$ref":"#/properties"}}}`))
	f.Add([]byte(`{"Items":{},"type":"array","items":{}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		first, err := Sanitize(in)
		if err != nil {
			return
		}
		b1, err := json.Marshal(first)
		if err != nil {
			t.Fatalf("marshal sanitized schema: %v", err)
		}
		second, err := Sanitize(b1)
		if err != nil {
			t.Fatalf("sanitized output %s does not sanitize again: %v", b1, err)
		}
		b2, err := json.Marshal(second)
		if err != nil {
			t.Fatalf("marshal twice-sanitized schema: %v", err)
		}
		if string(b1) != string(b2) {
			t.Fatalf("not idempotent:\nin:     %s\nonce:   %s\ntwice:  %s", in, b1, b2)
		}
	})
}
