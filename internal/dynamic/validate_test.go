package dynamic

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
)

func TestArgumentValidation(t *testing.T) {
	cases := []struct {
		name   string
		schema string
		args   string
		want   string // "" = valid, otherwise a substring of the error
	}{
		{"object ok", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, `{"a":"x"}`, ""},
		{"wrong root type", `{"type":"object"}`, `[1]`, "invalid arguments for t: expected object, got array"},
		{"missing required", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, `{}`, `missing required property "a"`},
		{"wrong property type", `{"type":"object","properties":{"a":{"type":"string"}}}`, `{"a":1}`, "invalid arguments for t: /a: expected string, got integer"},
		{"additional false", `{"type":"object","properties":{"a":{}},"additionalProperties":false}`, `{"a":1,"b":2}`, `unexpected property "b"`},
		{"additional true", `{"type":"object","properties":{},"additionalProperties":true}`, `{"b":2}`, ""},
		{"additional absent", `{"type":"object","properties":{}}`, `{"b":2}`, ""},
		{"additional schema", `{"type":"object","additionalProperties":{"type":"number"}}`, `{"b":"x"}`, "/b: expected number, got string"},
		{"pattern properties", `{"type":"object","patternProperties":{"^x":{}},"additionalProperties":false}`, `{"x1":1}`, ""},
		{"pattern properties extra", `{"type":"object","patternProperties":{"^x":{}},"additionalProperties":false}`, `{"b":1}`, `unexpected property "b"`},
		{"pattern properties typed", `{"type":"object","patternProperties":{"^x":{"type":"string"}}}`, `{"x1":1}`, "/x1: expected string, got integer"},
		{"integer ok", `{"type":"integer"}`, `3`, ""},
		{"integer as 3.0", `{"type":"integer"}`, `3.0`, ""},
		{"integer as 1e2", `{"type":"integer"}`, `1e2`, ""},
		{"integer fraction", `{"type":"integer"}`, `3.5`, "expected integer, got number"},
		{"negative integer", `{"type":"integer"}`, `-7`, ""},
		{"negative fraction", `{"type":"integer"}`, `-7.25`, "expected integer, got number"},
		{"integer with exponent fraction", `{"type":"integer"}`, `15e-1`, "expected integer, got number"},
		{"number accepts integer", `{"type":"number"}`, `3`, ""},
		{"big integer", `{"type":"integer"}`, `123456789012345678901234567890`, ""},
		{"nullable", `{"type":["string","null"]}`, `null`, ""},
		{"nullable wrong", `{"type":["string","null"]}`, `true`, "expected null or string, got boolean"},
		{"no type anything", `{"description":"any"}`, `{"x":[1]}`, ""},
		{"boolean schema true", `{"type":"object","properties":{"a":true}}`, `{"a":5}`, ""},
		{"boolean schema false", `{"type":"object","properties":{"a":false}}`, `{"a":5}`, "/a: no value is allowed here"},
		{"enum ok", `{"enum":["a","b"]}`, `"b"`, ""},
		{"enum bad", `{"enum":["a","b"]}`, `"c"`, `must be one of ["a", "b"]`},
		{"enum numbers without type", `{"enum":[1,2]}`, `2.0`, ""},
		{"enum objects", `{"enum":[{"k":[1,"x"]}]}`, `{"k":[1,"x"]}`, ""},
		{"const", `{"const":"x"}`, `"y"`, `must be "x"`},
		{"items", `{"type":"array","items":{"type":"string"}}`, `["a",1]`, "/1: expected string, got integer"},
		{"tuple items", `{"type":"array","items":[{"type":"string"},{"type":"number"}]}`, `["a",1,true]`, ""},
		{"tuple items wrong", `{"type":"array","items":[{"type":"string"},{"type":"number"}]}`, `[1]`, "/0: expected string"},
		{"prefixItems", `{"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"number"}}`, `["a",1,"b"]`, "/2: expected number"},
		{"anyOf ok", `{"anyOf":[{"type":"string"},{"type":"number"}]}`, `1`, ""},
		{"anyOf bad", `{"anyOf":[{"type":"string"},{"type":"number"}]}`, `true`, "does not match any of the 2 allowed schemas (first: expected string, got boolean)"},
		{"oneOf one match", `{"oneOf":[{"type":"string"},{"type":"number"}]}`, `"a"`, ""},
		{"oneOf two matches", `{"oneOf":[{"type":"string"},{"type":"string","enum":["a"]}]}`, `"a"`, "matches more than one of the allowed schemas (1 and 2)"},
		{"oneOf no match", `{"oneOf":[{"type":"string"},{"type":"number"}]}`, `true`, "does not match any of the 2 allowed schemas (first: expected string, got boolean)"},
		{"not", `{"not":{"type":"string"}}`, `"a"`, "must not match the excluded schema"},
		{"allOf", `{"allOf":[{"type":"object","required":["a"]},{"required":["b"]}]}`, `{"a":1}`, `missing required property "b"`},
		{"ref", `{"type":"object","properties":{"p":{"$ref":"#/$defs/P"}},"$defs":{"P":{"type":"integer"}}}`, `{"p":"x"}`, "/p: expected integer, got string"},
		{"ref escaped", `{"properties":{"p":{"$ref":"#/$defs/a~1b"}},"$defs":{"a/b":{"type":"boolean"}}}`, `{"p":1}`, "/p: expected boolean"},
		{"recursive ref", `{"$ref":"#/$defs/N","$defs":{"N":{"type":"object","properties":{"next":{"$ref":"#/$defs/N"},"v":{"type":"integer"}}}}}`,
			`{"next":{"next":{"v":"x"}}}`, "/next/next/v: expected integer"},
		{"self loop", `{"$ref":"#"}`, `1`, "refers to itself"},
		{"escaped property path", `{"properties":{"a/b":{"type":"string"}}}`, `{"a/b":1}`, "/a~1b: expected string"},
		{"minLength", `{"type":"string","minLength":2}`, `"a"`, "minLength: got 1, want 2"},
		{"minLength counts characters", `{"type":"string","minLength":2}`, `"éé"`, ""},
		{"maxLength", `{"type":"object","properties":{"s":{"type":"string","maxLength":3}}}`, `{"s":"abcd"}`, "/s: maxLength: got 4, want 3"},
		{"pattern", `{"type":"string","pattern":"^z"}`, `"a"`, "does not match pattern '^z'"},
		{"pattern ok", `{"type":"string","pattern":"^z"}`, `"zz"`, ""},
		{"pattern Go cannot compile matches all", `{"type":"string","pattern":"^(?!x)"}`, `"x"`, ""},
		{"minimum", `{"type":"integer","minimum":1}`, `0`, "minimum: got 0, want 1"},
		{"exclusiveMaximum", `{"type":"number","exclusiveMaximum":1.5}`, `1.5`, "exclusiveMaximum"},
		{"multipleOf", `{"type":"number","multipleOf":0.5}`, `0.75`, "multipleOf"},
		{"minItems", `{"type":"array","minItems":1}`, `[]`, "minItems: got 0, want 1"},
		{"uniqueItems", `{"type":"array","uniqueItems":true}`, `[1,1.0]`, "items at 0 and 1 are equal"},
		{"dependentRequired", `{"dependentRequired":{"a":["b"]}}`, `{"a":1}`, "b"},
		{"if then", `{"if":{"properties":{"k":{"const":"x"}}},"then":{"required":["v"]}}`, `{"k":"x"}`, `missing required property "v"`},
		{"format is an annotation", `{"type":"string","format":"email"}`, `"not an email"`, ""},
		{"draft-07 tuple and additionalItems", `{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"}],"additionalItems":false}`, `["a",1]`, "additionalItem(s) not allowed"},
		{"2020-12 unevaluatedProperties", `{"allOf":[{"properties":{"a":{}}}],"unevaluatedProperties":false}`, `{"a":1,"b":2}`, "/b: no value is allowed here"},
		{"deep error path", `{"properties":{"a":{"properties":{"b":{"items":{"type":"integer"}}}}}}`, `{"a":{"b":[1,"x"]}}`, "/a/b/1: expected integer, got string"},
		{"first property in order", `{"properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"}}}`, `{"c":1,"b":1,"a":1}`, "/a: expected string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := newArgValidator([]byte(tc.schema))
			require.NoError(t, err)
			args, err := decodeJSONValue([]byte(tc.args))
			require.NoError(t, err)
			tool := &Tool{Name: "t", validator: v}
			err = tool.ValidateArguments(args)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			var ae *ArgumentsError
			assert.ErrorAs(t, err, &ae)
		})
	}
}

func TestValidationIsBounded(t *testing.T) {
	// Each definition is an anyOf of two references to the next one, both
	// failing: 2^40 visits without the step budget.
	var defs []string
	for i := range 40 {
		defs = append(defs, fmt.Sprintf(`"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, `"d40":{"type":"string"}`)
	schema := `{"$ref":"#/$defs/d0","$defs":{` + strings.Join(defs, ",") + `}}`
	v, err := newArgValidator([]byte(schema))
	require.NoError(t, err)
	assert.NoError(t, v.validate(true), "gives up and accepts")

	// Deep values are judged to the bottom.
	deep := strings.Repeat(`{"items":`, 400) + `{"type":"string"}` + strings.Repeat(`}`, 400)
	v, err = newArgValidator([]byte(deep))
	require.NoError(t, err)
	arg := strings.Repeat("[", 400) + "1" + strings.Repeat("]", 400)
	val, err := decodeJSONValue([]byte(arg))
	require.NoError(t, err)
	err = v.validate(val)
	require.Error(t, err)
	assert.Contains(t, err.Error(), strings.Repeat("/0", 400)+": expected string, got integer")

	// The budget is per validation: after one that spent it, the next is
	// judged again.
	schema = `{"properties":{"slow":{"$ref":"#/$defs/d0"},"n":{"type":"integer"}},"$defs":{` + strings.Join(defs, ",") + `}}`
	v, err = newArgValidator([]byte(schema))
	require.NoError(t, err)
	assert.NoError(t, v.validate(map[string]any{"slow": true}), "gives up and accepts")
	assert.Error(t, v.validate(map[string]any{"n": "x"}))
}

// TestSchemaCompileErrors checks that a schema the validator cannot use is
// refused at registration with a reason, and that nothing is ever loaded
// from outside the schema.
func TestSchemaCompileErrors(t *testing.T) {
	cases := []struct{ name, schema, want string }{
		{"unknown type", `{"type":"whatever"}`, "not a valid JSON Schema: /type"},
		{"bad minLength", `{"minLength":"x"}`, "not a valid JSON Schema: /minLength: expected integer, got string"},
		{"missing ref target", `{"$ref":"#/$defs/missing"}`, "not found"},
		{"file ref", `{"$ref":"file:///etc/passwd"}`, "only references inside the schema are supported"},
		{"http ref", `{"$ref":"https://example.com/s.json"}`, "only references inside the schema are supported"},
		{"unknown $schema", `{"$schema":"https://example.com/meta"}`, "only references inside the schema are supported"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newArgValidator([]byte(tc.schema))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), argumentsSchemaURL)
		})
	}
}

func TestParseArguments(t *testing.T) {
	raw, v, err := parseArguments("  ")
	require.NoError(t, err)
	assert.Equal(t, "{}", string(raw))
	assert.Equal(t, map[string]any{}, v)

	raw, _, err = parseArguments(`{ "a" : [1, 2] }`)
	require.NoError(t, err)
	assert.Equal(t, `{"a":[1,2]}`, string(raw))

	_, _, err = parseArguments(`{"a":`)
	assert.Error(t, err)
	_, _, err = parseArguments(`{} {}`)
	assert.Error(t, err)
}

// TestUncompilableSchemaRegistrationAndRestore checks that a schema the
// validator cannot compile is refused at registration with the tool named,
// while a thread stored with one (registered before validation was full)
// still resumes, its arguments forwarded unvalidated.
func TestUncompilableSchemaRegistrationAndRestore(t *testing.T) {
	spec := `[{"type":"function","name":"odd","description":"d","inputSchema":{"type":"whatever"}}]`
	var specs []api.DynamicToolSpec
	require.NoError(t, json.Unmarshal([]byte(spec), &specs))
	_, err := Validate(specs, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dynamic tool input schema is not supported for odd: not a valid JSON Schema")

	tools, err := Restore([]byte(spec), Options{})
	require.NoError(t, err)
	tool, ok := tools.Lookup("", "odd")
	require.True(t, ok)
	assert.NoError(t, tool.ValidateArguments(map[string]any{"any": true}))
}
