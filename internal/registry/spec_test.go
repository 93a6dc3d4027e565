package registry

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func ptr[T any](v T) *T { return &v }

// goldenSpecs are the spec variants of docs/tools.md §1.3, each compared with
// testdata/specs/<name>.json.
var goldenSpecs = []struct {
	name string
	spec ToolSpec
}{
	{"function", FunctionSpec{
		Name:        "read_file",
		Description: "Reads a file.",
		Parameters: Object(map[string]*Schema{
			"path":   String("Absolute path"),
			"offset": Integer("1-based line"),
			"mode":   {Type: Types(TypeString), Enum: []any{"slice", "indentation"}},
			"tags":   Array(String(""), "Tags"),
			"opt":    {Type: Types(TypeString, TypeNull)},
			"either": {AnyOf: []*Schema{String(""), Number("")}},
		}, []string{"path"}, AllowAdditional(false)),
	}},
	{"function_strict_deferred", FunctionSpec{
		Name:         "lookup",
		Description:  "Looks up a key.",
		Strict:       true,
		DeferLoading: true,
		Parameters:   Object(map[string]*Schema{"key": String("")}, []string{"key"}, AllowAdditional(false)),
	}},
	{"function_nil_parameters", FunctionSpec{Name: "ping", Description: "Pings."}},
	{"freeform", FreeformSpec{
		Name:        "apply_patch",
		Description: "Edits files with a patch.",
		Format:      FreeformFormat{Definition: "start: line+\n"},
	}},
	{"local_shell", LocalShellSpec{}},
	{"web_search_plain", WebSearchSpec{}},
	{"web_search_cached", WebSearchSpec{ExternalWebAccess: ptr(false)}},
	{"web_search_full", WebSearchSpec{
		ExternalWebAccess:  ptr(true),
		Filters:            &WebSearchFilters{AllowedDomains: []string{"go.dev"}},
		UserLocation:       &WebSearchUserLocation{Type: "approximate", Country: "FR", City: "Paris", Timezone: "Europe/Paris"},
		SearchContextSize:  "medium",
		SearchContentTypes: []string{"text"},
	}},
	{"tool_search", ToolSearchSpec{
		Description: "# More tools\n\nFinds tools not listed yet.",
		Parameters: Object(map[string]*Schema{
			"query": String("What the tool should do."),
			"limit": Number("Most tools to return."),
		}, []string{"query"}, AllowAdditional(false)),
	}},
	{"namespace", NamespaceSpec{
		Name: "skills",
		Tools: []FunctionSpec{
			{Name: "list", Description: "Lists skills.", Parameters: Object(nil, nil, nil)},
			{Name: "read", Description: "Reads a skill.", Parameters: Object(map[string]*Schema{"uri": String("")}, []string{"uri"}, nil)},
		},
	}},
}

func TestSpecGolden(t *testing.T) {
	for _, tc := range goldenSpecs {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.spec)
			require.NoError(t, err)
			path := filepath.Join("testdata", "specs", tc.name+".json")
			if *update {
				var pretty bytes.Buffer
				require.NoError(t, json.Indent(&pretty, got, "", "  "))
				pretty.WriteByte('\n')
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, pretty.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test -update to create the golden file")
			assert.JSONEq(t, string(want), string(got))
		})
	}
}

// TestSpecWireShape pins the exact keys of each variant independently of the
// golden files, so that regenerating them cannot hide a wire change.
func TestSpecWireShape(t *testing.T) {
	cases := []struct {
		spec ToolSpec
		want string
	}{
		{FunctionSpec{Name: "f", Description: "d", Parameters: Object(nil, nil, nil)},
			`{"type":"function","name":"f","description":"d","strict":false,"parameters":{"type":"object","properties":{}}}`},
		{FunctionSpec{Name: "f", Description: "d", DeferLoading: true, Parameters: Object(nil, nil, nil)},
			`{"type":"function","name":"f","description":"d","strict":false,"defer_loading":true,"parameters":{"type":"object","properties":{}}}`},
		{FreeformSpec{Name: "p", Description: "d", Format: FreeformFormat{Definition: "start: x"}},
			`{"type":"custom","name":"p","description":"d","format":{"type":"grammar","syntax":"lark","definition":"start: x"}}`},
		{LocalShellSpec{}, `{"type":"local_shell"}`},
		{WebSearchSpec{}, `{"type":"web_search"}`},
		{WebSearchSpec{ExternalWebAccess: ptr(false)}, `{"type":"web_search","external_web_access":false}`},
		{NamespaceSpec{Name: "ns", Tools: []FunctionSpec{{Name: "t", Description: "d", Parameters: Object(nil, nil, nil)}}},
			`{"type":"namespace","name":"ns","description":"Tools in the ns namespace.","tools":[{"type":"function","name":"t","description":"d","strict":false,"parameters":{"type":"object","properties":{}}}]}`},
		{NamespaceSpec{Name: "ns", Description: "Mine."},
			`{"type":"namespace","name":"ns","description":"Mine.","tools":[]}`},
		{ToolSearchSpec{Description: "d", Parameters: Object(map[string]*Schema{"query": String("q")}, []string{"query"}, AllowAdditional(false))},
			`{"type":"tool_search","execution":"client","description":"d","parameters":{"type":"object","properties":{"query":{"type":"string","description":"q"}},"required":["query"],"additionalProperties":false}}`},
	}
	for _, tc := range cases {
		got, err := json.Marshal(tc.spec)
		require.NoError(t, err)
		assert.JSONEq(t, tc.want, string(got))
	}
}

func TestChatCompletionsTool(t *testing.T) {
	spec := FunctionSpec{Name: "f", Description: "d", DeferLoading: true, Parameters: Object(map[string]*Schema{"a": String("")}, nil, nil)}
	raw, ok, err := ChatCompletionsTool(spec)
	require.NoError(t, err)
	require.True(t, ok)
	assert.JSONEq(t, `{"type":"function","function":{"name":"f","description":"d","strict":false,"parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}`, string(raw))

	for _, s := range []ToolSpec{FreeformSpec{Name: "p"}, LocalShellSpec{}, WebSearchSpec{}, NamespaceSpec{Name: "n"}, ToolSearchSpec{}} {
		_, ok, err := ChatCompletionsTool(s)
		require.NoError(t, err)
		assert.False(t, ok, "%T is not offered to Chat Completions", s)
	}
}

func TestClassicSpec(t *testing.T) {
	params := Object(map[string]*Schema{
		"n":    {Type: Types(TypeInteger), Description: "count"},
		"s":    {Type: Types(TypeNull, TypeString), Enum: []any{"a", nil}},
		"any":  {AnyOf: []*Schema{String(""), Number("")}},
		"list": {Type: Types(TypeArray), Items: Integer("i"), Description: "items"},
		"obj":  {Type: Types(TypeObject), Description: "dropped in classic", Properties: map[string]*Schema{}, Required: []string{}},
	}, []string{"n"}, AllowAdditional(false))
	got, err := json.Marshal(ClassicSpec(FunctionSpec{Name: "f", Description: "d", Parameters: params}))
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"function","name":"f","description":"d","strict":false,"parameters":{
		"type":"object","required":["n"],"additionalProperties":false,"properties":{
			"n":{"type":"number","description":"count"},
			"s":{"type":"string"},
			"any":{"type":"string"},
			"list":{"type":"array","description":"items","items":{"type":"number","description":"i"}},
			"obj":{"type":"object","properties":{},"required":[]}}}}`, string(got))

	// The original is untouched.
	assert.True(t, params.Properties["n"].Type.Is(TypeInteger))
}

func TestValidateStrict(t *testing.T) {
	ok := Object(map[string]*Schema{
		"a": String(""),
		"b": {Type: Types(TypeString, TypeNull)},
		"c": Array(Object(map[string]*Schema{"x": Number("")}, []string{"x"}, AllowAdditional(false)), ""),
		"d": {AnyOf: []*Schema{String(""), Object(map[string]*Schema{}, []string{}, AllowAdditional(false))}},
	}, []string{"a", "b", "c", "d"}, AllowAdditional(false))
	require.NoError(t, ValidateStrict(ok))

	cases := []struct {
		name   string
		schema *Schema
		msg    string
	}{
		{"nil", nil, "missing schema"},
		{"root anyOf", &Schema{AnyOf: []*Schema{Object(nil, []string{}, AllowAdditional(false))}}, "root must not be anyOf"},
		{"root not object", String(""), "root must be of type object"},
		{"additionalProperties missing", Object(nil, []string{}, nil), "/: additionalProperties must be false"},
		{"additionalProperties true", Object(nil, []string{}, AllowAdditional(true)), "additionalProperties must be false"},
		{"additionalProperties schema", Object(nil, []string{}, AdditionalSchema(String(""))), "additionalProperties must be false"},
		{"optional property", Object(map[string]*Schema{"a": String(""), "b": String("")}, []string{"a"}, AllowAdditional(false)),
			"required must list exactly the declared properties"},
		{"required names unknown property", Object(map[string]*Schema{"a": String("")}, []string{"a", "z"}, AllowAdditional(false)),
			"required must list exactly"},
		{"nested object in items", Object(map[string]*Schema{"l": Array(Object(map[string]*Schema{"x": String("")}, nil, AllowAdditional(false)), "")}, []string{"l"}, AllowAdditional(false)),
			"/properties/l/items: required must list exactly"},
		{"nested object in anyOf", Object(map[string]*Schema{"u": {AnyOf: []*Schema{Object(nil, []string{}, nil)}}}, []string{"u"}, AllowAdditional(false)),
			"/properties/u/anyOf/0: additionalProperties must be false"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateStrict(tc.schema)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestSchemaJSONRoundTrip(t *testing.T) {
	in := `{"type":["object","null"],"description":"d","properties":{"a":{"type":"integer","enum":[1,2.5,12345678901234567890]},"b":{"anyOf":[{"type":"string"},{"type":"null"}]}},"required":["a"],"additionalProperties":{"type":"boolean"},"title":"ignored","Items":{"type":"string"}}`
	var s Schema
	require.NoError(t, json.Unmarshal([]byte(in), &s))
	out, err := json.Marshal(&s)
	require.NoError(t, err)
	// Unknown keywords are dropped; keys match exactly, so "Items" is not
	// items; big numbers keep their digits.
	assert.JSONEq(t, `{"type":["object","null"],"description":"d","properties":{"a":{"type":"integer","enum":[1,2.5,12345678901234567890]},"b":{"anyOf":[{"type":"string"},{"type":"null"}]}},"required":["a"],"additionalProperties":{"type":"boolean"}}`, string(out))
	assert.Contains(t, string(out), "12345678901234567890")

	var bad Schema
	assert.Error(t, json.Unmarshal([]byte(`{"type":"date"}`), &bad))
	assert.Error(t, json.Unmarshal([]byte(`{"additionalProperties":"yes"}`), &bad))
}

// A static spec is built once and its JSON encoded once; any other spec,
// even one equal in content, is encoded afresh.
func TestStaticSpecEncodedOnce(t *testing.T) {
	builds := 0
	build := func() FunctionSpec {
		builds++
		return FunctionSpec{Name: "static_tool", Description: "d", Parameters: Object(map[string]*Schema{"a": String("a")}, nil, nil)}
	}
	get := Static(build)
	a, b := get(), get()
	require.Equal(t, 1, builds)
	require.Same(t, a.Parameters, b.Parameters)
	ra, err := EncodeSpec(a)
	require.NoError(t, err)
	rb, err := EncodeSpec(b)
	require.NoError(t, err)
	require.Same(t, &ra[0], &rb[0])
	want, err := a.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, string(want), string(ra))

	fresh := build()
	r1, err := EncodeSpec(fresh)
	require.NoError(t, err)
	r2, err := EncodeSpec(fresh)
	require.NoError(t, err)
	require.Equal(t, string(want), string(r1))
	require.NotSame(t, &r1[0], &r2[0])

	// Specs that are not functions or freeform tools go to MarshalJSON.
	ns := NamespaceSpec{Name: "ns", Tools: []FunctionSpec{a}}
	_, err = EncodeSpec(ns)
	require.NoError(t, err)
}
