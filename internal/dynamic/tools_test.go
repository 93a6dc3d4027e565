package dynamic

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/registry"
)

func decodeSpecs(t *testing.T, s string) []api.DynamicToolSpec {
	t.Helper()
	var specs []api.DynamicToolSpec
	require.NoError(t, json.Unmarshal([]byte(s), &specs))
	return specs
}

// tuiTools is what codex-tui 0.169.0 registers on its startup thread
// (docs/protocol.md §7.5), abridged.
const tuiTools = `[{"type":"namespace","name":"codex_tui","description":"TUI tools","tools":[
	{"type":"function","name":"list_threads","description":"List threads","inputSchema":{"type":"object","properties":{"limit":{"type":"integer"}}},"deferLoading":true},
	{"type":"function","name":"set_thread_title","description":"Set a title","inputSchema":{"type":"object","properties":{"threadId":{"type":"string"},"title":{"type":"string"}},"required":["threadId","title"]},"deferLoading":true}
]}]`

func TestValidateAccepts(t *testing.T) {
	specs := decodeSpecs(t, `[
		{"name":"lookup_weather","description":"Weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},
		{"type":"namespace","name":"files","description":"","tools":[
			{"name":"read","description":"Read","inputSchema":{"properties":{"path":{"type":"string"}}}},
			{"type":"function","name":"secret","description":"Hidden","inputSchema":{"type":"object"},"deferLoading":true}
		]},
		{"type":"function","name":"later","description":"Deferred","inputSchema":{"type":"object"},"deferLoading":true}
	]`)
	tools, err := Validate(specs, Options{Builtins: []string{"shell", "apply_patch"}})
	require.NoError(t, err)
	assert.Equal(t, 4, tools.Len())

	w, ok := tools.Lookup("", "lookup_weather")
	require.True(t, ok)
	assert.Equal(t, "lookup_weather", w.DisplayName())
	assert.JSONEq(t, `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`, mustJSON(t, w.Schema))

	r, ok := tools.Lookup("files", "read")
	require.True(t, ok)
	assert.Equal(t, "files.read", r.DisplayName())
	assert.JSONEq(t, `{"type":"object","properties":{"path":{"type":"string"}}}`, mustJSON(t, r.Schema), "sanitized")
	_, ok = tools.Lookup("", "read")
	assert.False(t, ok)

	// Missing type is normalized to function in the persisted specs.
	norm := tools.Specs()
	assert.Equal(t, api.DynamicToolFunction, norm[0].Type)
	assert.Equal(t, api.DynamicToolFunction, norm[1].Tools[0].Type)
}

func TestModelSpecsHideDeferred(t *testing.T) {
	tools, err := Validate(decodeSpecs(t, `[
		{"name":"a","description":"A","inputSchema":{"type":"object"}},
		{"type":"namespace","name":"ns","description":"NS","tools":[
			{"name":"shown","description":"S","inputSchema":{"type":"object"}},
			{"name":"hidden","description":"H","inputSchema":{"type":"object"},"deferLoading":true}
		]},
		{"name":"b","description":"B","inputSchema":{"type":"object"},"deferLoading":true}
	]`+"\n"), Options{})
	require.NoError(t, err)
	model := tools.ModelSpecs()
	assert.JSONEq(t, `[
		{"type":"function","name":"a","description":"A","strict":false,"parameters":{"type":"object","properties":{}}},
		{"type":"namespace","name":"ns","description":"NS","tools":[
			{"type":"function","name":"shown","description":"S","strict":false,"parameters":{"type":"object","properties":{}}}
		]}
	]`, specsJSON(t, model))

	// Through a builder: every tool is callable, the model sees the same
	// list as ModelSpecs.
	b := registry.NewBuilder(registry.Config{})
	h := NewHandler(HandlerConfig{ThreadID: "th", Tools: tools, Broker: NewBroker(BrokerConfig{})})
	require.NoError(t, tools.AddTo(b, h))
	all, reg := b.Build()
	assert.Len(t, all, 3)
	for _, k := range [][2]string{{"", "a"}, {"ns", "shown"}, {"ns", "hidden"}, {"", "b"}} {
		got, ok := reg.Handler(k[0], k[1])
		assert.True(t, ok, "%v callable", k)
		assert.Same(t, h, got)
		assert.False(t, reg.SupportsParallel(k[0], k[1]))
	}
	assert.JSONEq(t, specsJSON(t, model), specsJSON(t, tools.OfferedSpecs(all)))
}

func TestTUINamespaceAllDeferred(t *testing.T) {
	tools, err := Validate(decodeSpecs(t, tuiTools), Options{})
	require.NoError(t, err)
	assert.Empty(t, tools.ModelSpecs())
	b := registry.NewBuilder(registry.Config{})
	require.NoError(t, b.Register(registry.FunctionSpec{Name: "shell"}, registry.HandlerFunc(nil), true))
	require.NoError(t, tools.AddTo(b, NewHandler(HandlerConfig{Tools: tools, Broker: NewBroker(BrokerConfig{})})))
	all, reg := b.Build()
	offered := tools.OfferedSpecs(all)
	require.Len(t, offered, 1)
	assert.Equal(t, "shell", offered[0].Spec.ToolName())
	_, ok := reg.Handler("codex_tui", "set_thread_title")
	assert.True(t, ok)
}

func TestNamespacesMerged(t *testing.T) {
	tools, err := Validate(decodeSpecs(t, `[
		{"type":"namespace","name":"ns","description":"","tools":[{"name":"a","description":"","inputSchema":{}}]},
		{"name":"top","description":"","inputSchema":{}},
		{"type":"namespace","name":"ns","description":"Second","tools":[{"name":"b","description":"","inputSchema":{}}]}
	]`), Options{})
	require.NoError(t, err)
	model := tools.ModelSpecs()
	require.Len(t, model, 2)
	ns := model[0].Spec.(registry.NamespaceSpec)
	assert.Equal(t, "Second", ns.Description)
	assert.Len(t, ns.Tools, 2)
	b := registry.NewBuilder(registry.Config{})
	require.NoError(t, tools.AddTo(b, NewHandler(HandlerConfig{Tools: tools, Broker: NewBroker(BrokerConfig{})})))
}

func TestValidateRejects(t *testing.T) {
	fn := func(name string) string {
		return fmt.Sprintf(`{"name":%q,"description":"d","inputSchema":{"type":"object"}}`, name)
	}
	big := strings.Repeat("x", DefaultLimits.MaxDescriptionBytes+1)
	bigSchema := `{"type":"object","description":"` + strings.Repeat("y", DefaultLimits.MaxSchemaBytes) + `"}`
	var many []string
	for i := range DefaultLimits.MaxTools + 1 {
		many = append(many, fn(fmt.Sprintf("t%d", i)))
	}
	var manyInNS []string
	for i := range DefaultLimits.MaxTools {
		manyInNS = append(manyInNS, fn(fmt.Sprintf("t%d", i)))
	}
	cases := []struct {
		name, specs, want string
	}{
		{"empty name", `[` + fn("") + `]`, "dynamic tool name must not be empty"},
		{"whitespace", `[` + fn(" a") + `]`, "dynamic tool name has leading/trailing whitespace:  a"},
		{"bad chars", `[` + fn("a.b") + `]`, "dynamic tool name must match ^[a-zA-Z0-9_-]+$: a.b"},
		{"too long", `[` + fn(strings.Repeat("a", 65)) + `]`, "dynamic tool name must be at most 64 characters"},
		{"reserved mcp", `[` + fn("mcp__x") + `]`, "dynamic tool name is reserved: mcp__x"},
		{"builtin clash", `[` + fn("shell") + `]`, "dynamic tool name conflicts with a built-in tool: shell"},
		{"duplicate", `[` + fn("a") + `,` + fn("a") + `]`, "duplicate dynamic tool name: a"},
		{"duplicate in namespace", `[{"type":"namespace","name":"ns","description":"","tools":[` + fn("a") + `,` + fn("a") + `]}]`,
			"duplicate dynamic tool name in namespace ns: a"},
		{"duplicate across merged namespace", `[{"type":"namespace","name":"ns","description":"","tools":[` + fn("a") + `]},{"type":"namespace","name":"ns","description":"","tools":[` + fn("a") + `]}]`,
			"duplicate dynamic tool name in namespace ns: a"},
		{"function vs namespace", `[` + fn("x") + `,{"type":"namespace","name":"x","description":"","tools":[` + fn("a") + `]}]`,
			"dynamic tool namespace conflicts with dynamic tool name: x"},
		{"namespace vs function", `[{"type":"namespace","name":"x","description":"","tools":[` + fn("a") + `]},` + fn("x") + `]`,
			"dynamic tool name conflicts with dynamic tool namespace: x"},
		{"namespace builtin", `[{"type":"namespace","name":"shell","description":"","tools":[` + fn("a") + `]}]`,
			"dynamic tool namespace conflicts with a built-in tool: shell"},
		{"namespace reserved", `[{"type":"namespace","name":"functions","description":"","tools":[` + fn("a") + `]}]`,
			"dynamic tool namespace collides with a reserved Responses API namespace: functions"},
		{"namespace mcp", `[{"type":"namespace","name":"mcp","description":"","tools":[` + fn("a") + `]}]`,
			"dynamic tool namespace is reserved: mcp"},
		{"empty namespace", `[{"type":"namespace","name":"ns","description":"","tools":[]}]`,
			"dynamic tool namespace ns must contain at least one tool"},
		{"nested namespace", `[{"type":"namespace","name":"ns","description":"","tools":[{"type":"namespace","name":"in","description":"","tools":[]}]}]`,
			`dynamic tool namespace ns: tool in must be of type function, not "namespace"`},
		{"name in namespace", `[{"type":"namespace","name":"ns","description":"","tools":[` + fn("") + `]}]`,
			"dynamic tool name must not be empty in namespace ns"},
		{"unknown type", `[{"type":"custom","name":"c","description":""}]`, `unknown dynamic tool type "custom" for c`},
		{"missing schema", `[{"name":"a","description":""}]`, "dynamic tool input schema is missing for a"},
		{"null schema", `[{"name":"a","description":"","inputSchema":null}]`, "dynamic tool input schema is not supported for a"},
		{"null type schema", `[{"type":"namespace","name":"ns","description":"","tools":[{"name":"a","description":"","inputSchema":{"type":"null"}}]}]`,
			"dynamic tool input schema is not supported for ns.a: tool input schema must not be a singleton null type"},
		{"bad schema", `[{"name":"a","description":"","inputSchema":{"type":"object","properties":{"p":{"description":5}}}}]`,
			"dynamic tool input schema is not supported for a: tool input schema is not supported"},
		{"large description", `[{"name":"a","description":"` + big + `","inputSchema":{}}]`,
			"dynamic tool description is too large for a: 4097 bytes (limit 4096)"},
		{"large schema", `[{"name":"a","description":"","inputSchema":` + bigSchema + `}]`,
			"dynamic tool input schema is too large for a"},
		{"too many", `[` + strings.Join(many, ",") + `]`, "too many dynamic tools: 129 (limit 128)"},
		{"too many with namespace", `[` + fn("top") + `,{"type":"namespace","name":"ns","description":"","tools":[` + strings.Join(manyInNS, ",") + `]}]`,
			"too many dynamic tools: more than 128"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Validate(decodeSpecs(t, tc.specs), Options{Builtins: []string{"shell"}})
			require.Error(t, err)
			assert.Equal(t, apperr.Invalid, apperr.CodeOf(err))
			assert.Contains(t, apperr.MessageOf(err), tc.want)
		})
	}
}

func TestRefExpansionLimit(t *testing.T) {
	// Each definition references the next twice: the sanitized schema
	// doubles at every level.
	var defs []string
	for i := range 12 {
		defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object","properties":{"a":{"$ref":"#/$defs/d%d"},"b":{"$ref":"#/$defs/d%d"}}}`, i, i+1, i+1))
	}
	defs = append(defs, `"d12":{"type":"string","description":"leaf"}`)
	schema := `{"$ref":"#/$defs/d0","$defs":{` + strings.Join(defs, ",") + `}}`
	_, err := Validate(decodeSpecs(t, `[{"name":"a","description":"","inputSchema":`+schema+`}]`), Options{})
	require.Error(t, err)
	assert.Contains(t, apperr.MessageOf(err), "too large for a after $ref expansion")
}

func TestTotalLimit(t *testing.T) {
	desc := strings.Repeat("d", 100)
	specs := `[` + fmt.Sprintf(`{"name":"a","description":%q,"inputSchema":{}},{"name":"b","description":%q,"inputSchema":{}}`, desc, desc) + `]`
	_, err := Validate(decodeSpecs(t, specs), Options{Limits: Limits{MaxTotalBytes: 150}})
	require.Error(t, err)
	assert.Contains(t, apperr.MessageOf(err), "dynamic tools are too large")
	_, err = Validate(decodeSpecs(t, specs), Options{Limits: Limits{MaxTotalBytes: 1000}})
	require.NoError(t, err)
}

func TestPersistRoundTrip(t *testing.T) {
	tools, err := Validate(decodeSpecs(t, `[
		{"name":"a","description":"A","inputSchema":{ "type" : "object" }},
		`+strings.TrimSuffix(strings.TrimPrefix(tuiTools, "["), "]")+`
	]`), Options{})
	require.NoError(t, err)

	// Persisted inside the thread's metadata.
	type meta struct {
		Model        string `json:"model"`
		DynamicTools *Tools `json:"dynamicTools,omitempty"`
	}
	data, err := json.Marshal(meta{Model: "m", DynamicTools: tools})
	require.NoError(t, err)
	assert.Contains(t, string(data), `"inputSchema":{"type":"object"}`, "compacted, normalized")
	assert.Contains(t, string(data), `"type":"function","name":"a"`)

	var back meta
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, tools.Specs(), back.DynamicTools.Specs())
	assert.Equal(t, 3, back.DynamicTools.Len())
	tool, ok := back.DynamicTools.Lookup("codex_tui", "set_thread_title")
	require.True(t, ok)
	assert.True(t, tool.DeferLoading)
	assert.Error(t, tool.ValidateArguments(map[string]any{}), "validator restored")

	again, err := Restore(mustJSONBytes(t, back.DynamicTools), Options{Builtins: []string{"shell"}})
	require.NoError(t, err)
	assert.Equal(t, tools.Specs(), again.Specs())

	empty, err := Restore(nil, Options{})
	require.NoError(t, err)
	assert.Equal(t, 0, empty.Len())
	empty, err = Restore([]byte("null"), Options{})
	require.NoError(t, err)
	assert.Equal(t, "[]", mustJSON(t, empty))

	// A stored tool that now clashes with a built-in is reported on restore.
	_, err = Restore([]byte(`[{"type":"function","name":"shell","description":"","inputSchema":{}}]`), Options{Builtins: []string{"shell"}})
	assert.Error(t, err)
	_, err = Restore([]byte(`{`), Options{})
	assert.Error(t, err)
}

func TestNilTools(t *testing.T) {
	var tools *Tools
	assert.Equal(t, 0, tools.Len())
	assert.Nil(t, tools.ModelSpecs())
	assert.Nil(t, tools.All())
	_, ok := tools.Lookup("", "a")
	assert.False(t, ok)
	assert.NoError(t, tools.AddTo(registry.NewBuilder(registry.Config{}), nil))
	specs := []registry.ConfiguredToolSpec{{Spec: registry.FunctionSpec{Name: "x"}}}
	assert.Equal(t, specs, tools.OfferedSpecs(specs))
	out, err := tools.MarshalJSON()
	require.NoError(t, err)
	assert.Equal(t, "[]", string(out))

	empty, err := Validate(nil, Options{})
	require.NoError(t, err)
	assert.Equal(t, 0, empty.Len())
	assert.Equal(t, "[]", mustJSON(t, empty))
}

func TestAddToBuilderConflict(t *testing.T) {
	tools, err := Validate(decodeSpecs(t, `[{"name":"update_plan","description":"","inputSchema":{}}]`), Options{})
	require.NoError(t, err)
	b := registry.NewBuilder(registry.Config{})
	require.NoError(t, b.Register(registry.FunctionSpec{Name: "update_plan"}, registry.HandlerFunc(nil), false))
	err = tools.AddTo(b, NewHandler(HandlerConfig{Tools: tools, Broker: NewBroker(BrokerConfig{})}))
	assert.Error(t, err, "the builder still refuses clashes with names the caller did not list")
}

func mustJSON(t *testing.T, v any) string { t.Helper(); return string(mustJSONBytes(t, v)) }

func mustJSONBytes(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func specsJSON(t *testing.T, specs []registry.ConfiguredToolSpec) string {
	t.Helper()
	out := make([]registry.ToolSpec, len(specs))
	for i, s := range specs {
		out[i] = s.Spec
	}
	return mustJSON(t, out)
}
