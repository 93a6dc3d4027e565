package registry

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The hand-written encoding of schemas and function specs is held to what
// encoding/json wrote for them before: mirrorSchema and mirrorFunction are
// the former tagged structs, encoded by reflection.

type mirrorSchema struct {
	Type                 TypeSet                  `json:"type,omitzero"`
	Description          string                   `json:"description,omitzero"`
	Enum                 []any                    `json:"enum,omitzero"`
	Items                *mirrorSchema            `json:"items,omitzero"`
	Properties           map[string]*mirrorSchema `json:"properties,omitzero"`
	Required             []string                 `json:"required,omitzero"`
	AdditionalProperties *mirrorAdditional        `json:"additionalProperties,omitzero"`
	AnyOf                []*mirrorSchema          `json:"anyOf,omitzero"`
}

type mirrorAdditional struct {
	Schema  *mirrorSchema
	Allowed bool
}

func (a mirrorAdditional) MarshalJSON() ([]byte, error) {
	if a.Schema != nil {
		return json.Marshal(a.Schema)
	}
	return json.Marshal(a.Allowed)
}

type mirrorFunction struct {
	Type         string        `json:"type,omitempty"`
	Name         string        `json:"name"`
	Description  string        `json:"description"`
	Strict       bool          `json:"strict"`
	DeferLoading bool          `json:"defer_loading,omitzero"`
	Parameters   *mirrorSchema `json:"parameters"`
}

// mirrorOf copies s into the mirror types, keeping nil apart from empty.
func mirrorOf(s *Schema) *mirrorSchema {
	if s == nil {
		return nil
	}
	m := &mirrorSchema{Type: s.Type, Description: s.Description, Enum: s.Enum, Items: mirrorOf(s.Items), Required: s.Required}
	if s.Properties != nil {
		m.Properties = make(map[string]*mirrorSchema, len(s.Properties))
		for name, p := range s.Properties {
			m.Properties[name] = mirrorOf(p)
		}
	}
	if ap := s.AdditionalProperties; ap != nil {
		m.AdditionalProperties = &mirrorAdditional{Schema: mirrorOf(ap.Schema), Allowed: ap.Allowed}
	}
	if s.AnyOf != nil {
		m.AnyOf = make([]*mirrorSchema, len(s.AnyOf))
		for i, b := range s.AnyOf {
			m.AnyOf[i] = mirrorOf(b)
		}
	}
	return m
}

func mirrorWire(f FunctionSpec, tagged bool) mirrorFunction {
	w := f.wire(tagged)
	return mirrorFunction{Type: w.Type, Name: w.Name, Description: w.Description, Strict: w.Strict, DeferLoading: w.DeferLoading, Parameters: mirrorOf(w.Parameters)}
}

// reflectiveSpecJSON encodes spec as encoding/json did before the
// hand-written encoding; the variants without a schema encode as they
// still do.
func reflectiveSpecJSON(spec ToolSpec) ([]byte, error) {
	switch s := spec.(type) {
	case FunctionSpec:
		return json.Marshal(mirrorWire(s, true))
	case NamespaceSpec:
		tools := make([]mirrorFunction, len(s.Tools))
		for i, t := range s.Tools {
			tools[i] = mirrorWire(t, true)
		}
		return json.Marshal(struct {
			Type        string           `json:"type"`
			Name        string           `json:"name"`
			Description string           `json:"description"`
			Tools       []mirrorFunction `json:"tools"`
		}{"namespace", s.Name, s.description(), tools})
	case ToolSearchSpec:
		params := s.Parameters
		if params == nil {
			params = Object(nil, nil, nil)
		}
		return json.Marshal(struct {
			Type        string        `json:"type"`
			Execution   string        `json:"execution"`
			Description string        `json:"description"`
			Parameters  *mirrorSchema `json:"parameters"`
		}{"tool_search", "client", s.Description, mirrorOf(params)})
	default:
		return json.Marshal(spec)
	}
}

// reflectiveChatJSON is ChatCompletionsTool's former encoding of f.
func reflectiveChatJSON(f FunctionSpec) ([]byte, error) {
	w := mirrorWire(f, false)
	w.DeferLoading = false
	return json.Marshal(struct {
		Type     string         `json:"type"`
		Function mirrorFunction `json:"function"`
	}{"function", w})
}

// trickyStrings are the cases of encoding/json's string escaping.
var trickyStrings = []string{
	"", "plain", `say "hi"`, `C:\path\to`, "line\nbreak\ttab\rret\bback\fform",
	"\x00\x01\x1f nul and controls", "\x7f del", "<script>&amp;</script>", "a\u2028b\u2029c",
	"bad \xff byte", "cut \xe2\x82 rune", "\xc0\xaf overlong", "\xed\xa0\x80 surrogate", "é ü 日本語 😀",
	"U+FFFD itself: \ufffd", strings.Repeat("long text ", 30),
}

// randomString glues pieces of pool (or of trickyStrings) together.
func randomString(r *rand.Rand, pool []string) string {
	if len(pool) == 0 {
		pool = trickyStrings
	}
	var sb strings.Builder
	for range r.IntN(4) {
		sb.WriteString(pool[r.IntN(len(pool))])
	}
	return sb.String()
}

type namedString string

// randomEnumValue is a value of any kind an enum may hold, the fallback
// kinds included.
func randomEnumValue(r *rand.Rand, pool []string) any {
	switch r.IntN(12) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return []float64{0, -1.5, 1e21, 1e-7, 3, 123456789}[r.IntN(6)]
	case 3:
		return r.IntN(2000) - 1000
	case 4:
		return json.Number([]string{"12", "-0.5", "1e3"}[r.IntN(3)])
	case 5:
		return namedString(randomString(r, pool))
	case 6:
		return map[string]any{randomString(r, pool): randomString(r, pool), "n": 1}
	case 7:
		return []any{randomString(r, pool), true}
	default:
		return randomString(r, pool)
	}
}

// randomList is nil, empty, or one to most values made by gen.
func randomList[T any](r *rand.Rand, most int, gen func() T) []T {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []T{}
	}
	l := make([]T, 1+r.IntN(most))
	for i := range l {
		l[i] = gen()
	}
	return l
}

// randomSchema builds a schema exercising every field in its nil, empty
// and filled forms, with nil schemas where a map or slice holds them.
func randomSchema(r *rand.Rand, pool []string, depth int) *Schema {
	s := &Schema{}
	names := []SchemaType{TypeString, TypeNumber, TypeBoolean, TypeInteger, TypeObject, TypeArray, TypeNull}
	s.Type = randomList(r, 3, func() SchemaType { return names[r.IntN(len(names))] })
	if r.IntN(3) > 0 {
		s.Description = randomString(r, pool)
	}
	s.Enum = randomList(r, 4, func() any { return randomEnumValue(r, pool) })
	child := func() *Schema {
		if depth <= 0 || r.IntN(6) == 0 {
			return nil
		}
		return randomSchema(r, pool, depth-1)
	}
	if r.IntN(3) == 0 {
		s.Items = child()
	}
	switch r.IntN(4) {
	case 0:
		s.Properties = map[string]*Schema{}
	case 1, 2:
		s.Properties = map[string]*Schema{}
		for range 1 + r.IntN(6) {
			s.Properties[randomString(r, pool)] = child()
		}
	}
	s.Required = randomList(r, 3, func() string { return randomString(r, pool) })
	switch r.IntN(5) {
	case 0:
		s.AdditionalProperties = AllowAdditional(r.IntN(2) == 0)
	case 1:
		s.AdditionalProperties = AdditionalSchema(child())
	}
	s.AnyOf = randomList(r, 3, child)
	return s
}

// assertSchemaEncodesAsBefore checks every path that encodes s against
// the reflective mirror.
func assertSchemaEncodesAsBefore(t *testing.T, s *Schema) {
	t.Helper()
	want, err := json.Marshal(mirrorOf(s))
	require.NoError(t, err)
	got, err := s.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "Schema.MarshalJSON")
	got, err = json.Marshal(s)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "json.Marshal(*Schema)")

	// A struct holding a schema, by pointer and by value (the latter is
	// not addressable, so encoding/json reflects over its fields).
	type holder struct {
		P *Schema `json:"p"`
		V Schema  `json:"v"`
	}
	type mirrorHolder struct {
		P *mirrorSchema `json:"p"`
		V mirrorSchema  `json:"v"`
	}
	want, err = json.Marshal(mirrorHolder{mirrorOf(s), *mirrorOf(s)})
	require.NoError(t, err)
	got, err = json.Marshal(holder{s, *s})
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "struct holding a schema")

	want, err = mirrorAdditional{Schema: mirrorOf(s)}.MarshalJSON()
	require.NoError(t, err)
	got, err = AdditionalSchema(s).MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "AdditionalProperties.MarshalJSON")

	f := FunctionSpec{Name: "f" + s.Description, Description: s.Description, Strict: len(s.Required) > 0, DeferLoading: s.Items != nil, Parameters: s}
	assertSpecEncodesAsBefore(t, f)
	assertSpecEncodesAsBefore(t, NamespaceSpec{Name: "ns", Tools: []FunctionSpec{f, {Name: "nil params"}}})
	assertSpecEncodesAsBefore(t, ToolSearchSpec{Description: s.Description, Parameters: s})
}

// assertSpecEncodesAsBefore checks json.Marshal(spec) and, for function
// specs, ChatCompletionsTool against the reflective encoding.
func assertSpecEncodesAsBefore(t *testing.T, spec ToolSpec) {
	t.Helper()
	want, err := reflectiveSpecJSON(spec)
	require.NoError(t, err)
	got, err := json.Marshal(spec)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "%T %s", spec, spec.ToolName())
	if f, ok := spec.(FunctionSpec); ok {
		direct, err := f.MarshalJSON()
		require.NoError(t, err)
		require.Equal(t, string(want), string(direct), "FunctionSpec.MarshalJSON %s", spec.ToolName())
		want, err = reflectiveChatJSON(f)
		require.NoError(t, err)
		got, ok, err := ChatCompletionsTool(spec)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, string(want), string(got), "ChatCompletionsTool %s", spec.ToolName())
	}
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	var all []string
	all = append(all, trickyStrings...)
	require.True(t, slices.ContainsFunc(all, func(s string) bool { return !utf8.ValidString(s) }), "cases of invalid UTF-8")
	for c := range 256 {
		all = append(all, string([]byte{byte(c)}), "x"+string([]byte{byte(c)})+"y")
	}
	for _, r := range []rune{0x7ff, 0x800, 0xffff, 0x10000, 0x10ffff, 0x2027, 0x2028, 0x2029, 0x202a, 0xfeff} {
		all = append(all, string(r), "a"+string(r)+"<")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, r.IntN(24))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		all = append(all, string(b), randomString(r, nil))
	}
	for _, s := range all {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(appendJSONString(nil, s)), "%q", s)
	}
}

func TestSchemaJSONCases(t *testing.T) {
	cases := map[string]*Schema{
		"empty":                    {},
		"empty non-nil fields":     {Type: TypeSet{}, Enum: []any{}, Properties: map[string]*Schema{}, Required: []string{}, AnyOf: []*Schema{}},
		"nil members":              {Properties: map[string]*Schema{"a": nil, "b": String("")}, AnyOf: []*Schema{nil, Number("")}},
		"additional true":          {AdditionalProperties: AllowAdditional(true)},
		"additional false":         Object(nil, nil, AllowAdditional(false)),
		"additional schema":        Object(nil, []string{}, AdditionalSchema(Array(String("<x>"), ""))),
		"additional nil schema":    {AdditionalProperties: AdditionalSchema(nil)},
		"type pair":                {Type: Types(TypeString, TypeNull), Description: "nullable"},
		"type triple":              {Type: Types(TypeString, TypeNumber, TypeNull)},
		"enum mixed":               {Enum: []any{"a", 1, 2.5, 1e21, true, false, nil, json.Number("7"), namedString("<n>"), []any{"x"}, map[string]any{"b": 1, "a": 2}}},
		"keys sort as strings":     Object(map[string]*Schema{"b": {}, "a": {}, "B": {}, "_": {}, "a2": {}, "a10": {}, "é": {}, "<": {}, "": {}}, nil, nil),
		"every helper":             Object(map[string]*Schema{"s": String("s"), "n": Number("n"), "i": Integer("i"), "b": Boolean("b"), "a": Array(Integer(""), "a"), "o": Object(nil, nil, nil)}, []string{"s", "n"}, AllowAdditional(false)),
		"anyOf of objects":         {AnyOf: []*Schema{Object(map[string]*Schema{"x": String("")}, []string{"x"}, nil), {Type: Types(TypeNull)}}},
		"classic of nested":        Object(map[string]*Schema{"u": {Type: Types(TypeNull, TypeInteger), Enum: []any{1}}, "v": {AnyOf: []*Schema{String("")}}, "w": Array(nil, "")}, nil, AdditionalSchema(Integer(""))).Classic(),
		"strings escaped anywhere": Object(map[string]*Schema{"k\"\\<\u2028\xff": String("d\"\\\n<>&\u2029\xfe")}, []string{"r\"<\x01"}, nil),
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) { assertSchemaEncodesAsBefore(t, s) })
	}
	for _, tc := range goldenSpecs {
		t.Run("golden "+tc.name, func(t *testing.T) { assertSpecEncodesAsBefore(t, tc.spec) })
	}
	t.Run("decoded numbers", func(t *testing.T) {
		var s Schema
		require.NoError(t, json.Unmarshal([]byte(`{"type":["integer","null"],"enum":[1,2.50,-0,1E3,1e400,null,"<"]}`), &s))
		assertSchemaEncodesAsBefore(t, &s)
	})
	t.Run("nil schema", func(t *testing.T) {
		got, err := (*Schema)(nil).MarshalJSON()
		require.NoError(t, err)
		assert.Equal(t, "null", string(got))
	})
}

func TestSchemaJSONRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for range 1000 {
		assertSchemaEncodesAsBefore(t, randomSchema(r, nil, 3))
	}
}

func TestSchemaJSONDepth(t *testing.T) {
	// Deeper than the point where cycles are looked for, without one:
	// encoded as encoding/json does.
	deep := String("leaf")
	for i := range 1500 {
		if i%2 == 0 {
			deep = Array(deep, "")
		} else {
			deep = Object(map[string]*Schema{"p": deep}, nil, nil)
		}
	}
	want, err := json.Marshal(mirrorOf(deep))
	require.NoError(t, err)
	got, err := json.Marshal(deep)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))

	// A schema that contains itself is an error, as it was, not a stack
	// overflow.
	loop := Object(map[string]*Schema{"self": nil}, nil, nil)
	loop.Properties["self"] = Array(loop, "")
	_, err = loop.MarshalJSON()
	assert.ErrorContains(t, err, "cycle")
	_, err = json.Marshal(FunctionSpec{Name: "loop", Parameters: loop})
	assert.ErrorContains(t, err, "cycle")
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

// FuzzSchemaJSON builds a random schema from the seed, its strings cut
// from text, and compares its encodings with the reflective ones.
func FuzzSchemaJSON(f *testing.F) {
	f.Add(uint64(1), "a<b>\"c\\d\u2028e\xff")
	f.Add(uint64(2), "")
	f.Fuzz(func(t *testing.T, seed uint64, text string) {
		var pool []string
		for len(text) > 0 && len(pool) < 16 {
			n := 1 + int(text[0])%7
			if n > len(text) {
				n = len(text)
			}
			pool = append(pool, text[:n])
			text = text[n:]
		}
		r := rand.New(rand.NewPCG(seed, uint64(len(pool))))
		assertSchemaEncodesAsBefore(t, randomSchema(r, pool, 3))
	})
}

// benchShellSpec is a shell-like function spec of a realistic size.
func benchShellSpec() FunctionSpec {
	desc := func(topic string) string {
		d := "The " + topic + " for this call. "
		for len(d) < 200 {
			d += "It is passed to the command as given, with no shell expansion, and recorded in the transcript. "
		}
		return d[:200]
	}
	perms := String(desc("sandbox permissions"))
	perms.Enum = []any{"use_default", "require_escalated"}
	return FunctionSpec{
		Name:        "shell",
		Description: "Runs a shell command and returns its output. " + desc("command"),
		Parameters: Object(map[string]*Schema{
			"command":             Array(String(""), desc("command line, as an argv array,")),
			"workdir":             String(desc("working directory")),
			"timeout_ms":          Integer(desc("timeout in milliseconds")),
			"login":               Boolean(desc("login shell choice")),
			"sandbox_permissions": perms,
			"justification":       String(desc("justification shown to the user")),
			"prefix_rule":         Array(String(""), desc("prefix rule")),
			"env":                 Object(nil, nil, AdditionalSchema(String(desc("environment value")))),
		}, []string{"command"}, AllowAdditional(false)),
	}
}

// oldFunctionSpec is FunctionSpec as it was: a marshaler that encodes its
// wire struct by reflection.
type oldFunctionSpec struct{ w mirrorFunction }

func (o oldFunctionSpec) MarshalJSON() ([]byte, error) { return json.Marshal(o.w) }

func BenchmarkFunctionSpecMarshal(b *testing.B) {
	spec := benchShellSpec()
	old := oldFunctionSpec{mirrorWire(spec, true)}
	want, err := old.MarshalJSON()
	require.NoError(b, err)
	got, err := spec.MarshalJSON()
	require.NoError(b, err)
	require.Equal(b, string(want), string(got))
	b.Run("reflective", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := old.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("handwritten", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := spec.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// As the turn loop calls them: json.Marshal(spec), which compacts and
	// copies what MarshalJSON returns.
	b.Run("reflective_via_json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(old); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("handwritten_via_json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(ToolSpec(spec)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
