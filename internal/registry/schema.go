package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// SchemaType is a JSON Schema primitive type name.
type SchemaType string

// The type names of the supported subset (docs/tools.md §1.5).
const (
	// TypeString is a JSON string.
	TypeString SchemaType = "string"
	// TypeNumber is any JSON number.
	TypeNumber SchemaType = "number"
	// TypeBoolean is true or false.
	TypeBoolean SchemaType = "boolean"
	// TypeInteger is an integral number; classic emit turns it into number.
	TypeInteger SchemaType = "integer"
	// TypeObject is a JSON object.
	TypeObject SchemaType = "object"
	// TypeArray is a JSON array.
	TypeArray SchemaType = "array"
	// TypeNull is JSON null; as the only type of a root schema it is rejected.
	TypeNull SchemaType = "null"
)

func knownType(name string) bool {
	switch SchemaType(name) {
	case TypeString, TypeNumber, TypeBoolean, TypeInteger, TypeObject, TypeArray, TypeNull:
		return true
	}
	return false
}

// TypeSet is a schema's "type": one name (encoded as a string) or several
// (encoded as an array, e.g. a nullable ["string","null"]).
type TypeSet []SchemaType

// Types returns a TypeSet of the given names.
func Types(names ...SchemaType) TypeSet { return TypeSet(names) }

// Has reports whether t contains name.
func (t TypeSet) Has(name SchemaType) bool { return slices.Contains(t, name) }

// Is reports whether t is exactly the single type name.
func (t TypeSet) Is(name SchemaType) bool { return len(t) == 1 && t[0] == name }

// IsZero reports whether no type is set, so that omitzero drops the field.
func (t TypeSet) IsZero() bool { return len(t) == 0 }

// MarshalJSON encodes one name as a string and several as an array.
func (t TypeSet) MarshalJSON() ([]byte, error) {
	if len(t) == 1 {
		return json.Marshal(string(t[0]))
	}
	names := make([]string, len(t))
	for i, n := range t {
		names[i] = string(n)
	}
	return json.Marshal(names)
}

// UnmarshalJSON accepts a type name or an array of type names.
func (t *TypeSet) UnmarshalJSON(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	ts, err := typeSetFromValue(v)
	if err != nil {
		return err
	}
	*t = ts
	return nil
}

func typeSetFromValue(v any) (TypeSet, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		if !knownType(v) {
			return nil, fmt.Errorf("unknown schema type %q", v)
		}
		return TypeSet{SchemaType(v)}, nil
	case []any:
		ts := make(TypeSet, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok || !knownType(s) {
				return nil, fmt.Errorf("unknown schema type %v", e)
			}
			ts = append(ts, SchemaType(s))
		}
		return ts, nil
	default:
		return nil, fmt.Errorf("schema type must be a string or an array of strings")
	}
}

// AdditionalProperties is a schema's "additionalProperties": a boolean or a
// schema for the extra values.
type AdditionalProperties struct {
	// Schema, when non-nil, is the schema of additional values; otherwise
	// Allowed is the boolean form.
	Schema *Schema
	// Allowed is the boolean form, used when Schema is nil.
	Allowed bool
}

// AllowAdditional returns the boolean form of additionalProperties.
func AllowAdditional(allowed bool) *AdditionalProperties {
	return &AdditionalProperties{Allowed: allowed}
}

// AdditionalSchema returns the schema form of additionalProperties.
func AdditionalSchema(s *Schema) *AdditionalProperties { return &AdditionalProperties{Schema: s} }

// MarshalJSON encodes the boolean or the schema.
func (a AdditionalProperties) MarshalJSON() ([]byte, error) {
	if a.Schema != nil {
		return a.Schema.MarshalJSON()
	}
	return strconv.AppendBool(nil, a.Allowed), nil
}

// UnmarshalJSON accepts a boolean or a schema object.
func (a *AdditionalProperties) UnmarshalJSON(data []byte) error {
	v, err := decodeJSON(data)
	if err != nil {
		return err
	}
	ap, err := additionalFromValue(v, "/additionalProperties")
	if err != nil {
		return err
	}
	if ap == nil {
		return errors.New("additionalProperties must be a boolean or a schema")
	}
	*a = *ap
	return nil
}

// Schema is the JSON Schema subset sent to the model (the "current" model of
// docs/tools.md §1.5). Fields left at their zero value are not serialized; a
// non-nil empty Properties map is serialized as {}.
type Schema struct {
	// Type is the type name or names.
	Type TypeSet `json:"type,omitzero"`
	// Description documents the value for the model.
	Description string `json:"description,omitzero"`
	// Enum lists the allowed values.
	Enum []any `json:"enum,omitzero"`
	// Items is the schema of array elements.
	Items *Schema `json:"items,omitzero"`
	// Properties maps object property names to their schemas.
	Properties map[string]*Schema `json:"properties,omitzero"`
	// Required lists the required property names.
	Required []string `json:"required,omitzero"`
	// AdditionalProperties is the boolean or schema for undeclared
	// properties.
	AdditionalProperties *AdditionalProperties `json:"additionalProperties,omitzero"`
	// AnyOf lists alternative schemas.
	AnyOf []*Schema `json:"anyOf,omitzero"`
}

// String returns a string schema.
func String(description string) *Schema {
	return &Schema{Type: Types(TypeString), Description: description}
}

// Number returns a number schema.
func Number(description string) *Schema {
	return &Schema{Type: Types(TypeNumber), Description: description}
}

// Integer returns an integer schema.
func Integer(description string) *Schema {
	return &Schema{Type: Types(TypeInteger), Description: description}
}

// Boolean returns a boolean schema.
func Boolean(description string) *Schema {
	return &Schema{Type: Types(TypeBoolean), Description: description}
}

// Array returns an array schema with the given items.
func Array(items *Schema, description string) *Schema {
	return &Schema{Type: Types(TypeArray), Description: description, Items: items}
}

// Object returns an object schema. A nil properties map is sent as {}.
func Object(properties map[string]*Schema, required []string, additional *AdditionalProperties) *Schema {
	if properties == nil {
		properties = map[string]*Schema{}
	}
	return &Schema{Type: Types(TypeObject), Properties: properties, Required: required, AdditionalProperties: additional}
}

// UnmarshalJSON decodes a schema of the subset, ignoring keywords outside
// it. Keys match exactly (unlike encoding/json's case-insensitive default).
// It does not sanitize; use Sanitize for arbitrary input.
func (s *Schema) UnmarshalJSON(data []byte) error {
	v, err := decodeJSON(data)
	if err != nil {
		return err
	}
	out, err := schemaFromValue(v, "")
	if err != nil {
		return err
	}
	*s = *out
	return nil
}

// decodeJSON decodes one JSON value keeping numbers as json.Number.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("invalid JSON: trailing data after the value")
	}
	return v, nil
}

func pathOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// schemaFromValue decodes a generic JSON value into the subset, dropping
// unknown keywords (the decode step after sanitize).
func schemaFromValue(v any, path string) (*Schema, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("schema at %s must be a JSON object", pathOrRoot(path))
	}
	s := &Schema{}
	var err error
	if s.Type, err = typeSetFromValue(m["type"]); err != nil {
		return nil, fmt.Errorf("schema at %s: %w", pathOrRoot(path), err)
	}
	switch d := m["description"].(type) {
	case nil:
	case string:
		s.Description = d
	default:
		return nil, fmt.Errorf("schema at %s: description must be a string", pathOrRoot(path))
	}
	switch e := m["enum"].(type) {
	case nil:
	case []any:
		s.Enum = slices.Clone(e)
	default:
		return nil, fmt.Errorf("schema at %s: enum must be an array", pathOrRoot(path))
	}
	if it, ok := m["items"]; ok && it != nil {
		if s.Items, err = schemaFromValue(it, path+"/items"); err != nil {
			return nil, err
		}
	}
	switch p := m["properties"].(type) {
	case nil:
	case map[string]any:
		s.Properties = make(map[string]*Schema, len(p))
		for name, pv := range p {
			ps, err := schemaFromValue(pv, path+"/properties/"+escapePointerToken(name))
			if err != nil {
				return nil, err
			}
			s.Properties[name] = ps
		}
	default:
		return nil, fmt.Errorf("schema at %s: properties must be an object", pathOrRoot(path))
	}
	switch r := m["required"].(type) {
	case nil:
	case []any:
		s.Required = make([]string, 0, len(r))
		for _, e := range r {
			name, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("schema at %s: required must be an array of strings", pathOrRoot(path))
			}
			s.Required = append(s.Required, name)
		}
	default:
		return nil, fmt.Errorf("schema at %s: required must be an array of strings", pathOrRoot(path))
	}
	if s.AdditionalProperties, err = additionalFromValue(m["additionalProperties"], path+"/additionalProperties"); err != nil {
		return nil, err
	}
	switch a := m["anyOf"].(type) {
	case nil:
	case []any:
		s.AnyOf = make([]*Schema, 0, len(a))
		for i, e := range a {
			bs, err := schemaFromValue(e, fmt.Sprintf("%s/anyOf/%d", path, i))
			if err != nil {
				return nil, err
			}
			s.AnyOf = append(s.AnyOf, bs)
		}
	default:
		return nil, fmt.Errorf("schema at %s: anyOf must be an array", pathOrRoot(path))
	}
	return s, nil
}

func additionalFromValue(v any, path string) (*AdditionalProperties, error) {
	switch a := v.(type) {
	case nil:
		return nil, nil
	case bool:
		return AllowAdditional(a), nil
	case map[string]any:
		s, err := schemaFromValue(a, path)
		if err != nil {
			return nil, err
		}
		return AdditionalSchema(s), nil
	default:
		return nil, fmt.Errorf("schema at %s must be a boolean or a schema", path)
	}
}

func escapePointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// Classic returns a copy of s in the classic Codex model, for providers that
// choke on the current one (docs/tools.md §1.6 "classic differences"): type arrays
// collapse to their first member among object, array, string, number,
// integer, boolean (so ["null","string"] becomes string; no supported member
// gives string); integer becomes number; enum and anyOf are dropped; objects
// keep only properties, required and additionalProperties; arrays keep items
// and description; a schema without a type becomes string.
func (s *Schema) Classic() *Schema {
	if s == nil {
		return nil
	}
	t := TypeString
	for _, n := range s.Type {
		if n != TypeNull {
			t = n
			break
		}
	}
	if t == TypeInteger {
		t = TypeNumber
	}
	out := &Schema{Type: Types(t)}
	switch t {
	case TypeObject:
		out.Properties = make(map[string]*Schema, len(s.Properties))
		for name, p := range s.Properties {
			out.Properties[name] = p.Classic()
		}
		out.Required = slices.Clone(s.Required)
		if s.AdditionalProperties != nil {
			ap := *s.AdditionalProperties
			ap.Schema = ap.Schema.Classic()
			out.AdditionalProperties = &ap
		}
	case TypeArray:
		out.Description = s.Description
		out.Items = s.Items.Classic()
		if out.Items == nil {
			out.Items = String("")
		}
	default:
		out.Description = s.Description
	}
	return out
}

// ValidateStrict checks the OpenAI Structured Outputs rules required for
// strict:true (docs/tools.md §1.4): the root is an object schema without anyOf;
// every object has additionalProperties:false and a required list naming
// exactly its declared properties; the same applies inside properties,
// array items and anyOf branches. Size limits are not checked.
func ValidateStrict(s *Schema) error {
	if s == nil {
		return errors.New("strict schema: missing schema")
	}
	if len(s.AnyOf) > 0 {
		return errors.New("strict schema: root must not be anyOf")
	}
	if !s.Type.Is(TypeObject) {
		return errors.New("strict schema: root must be of type object")
	}
	return validateStrictNode(s, "")
}

func validateStrictNode(s *Schema, path string) error {
	if s == nil {
		return nil
	}
	where := pathOrRoot(path)
	if s.Type.Has(TypeObject) {
		if s.AdditionalProperties == nil || s.AdditionalProperties.Schema != nil || s.AdditionalProperties.Allowed {
			return fmt.Errorf("strict schema: %s: additionalProperties must be false", where)
		}
		declared := make([]string, 0, len(s.Properties))
		for name := range s.Properties {
			declared = append(declared, name)
		}
		sort.Strings(declared)
		req := slices.Clone(s.Required)
		sort.Strings(req)
		if !slices.Equal(declared, req) {
			return fmt.Errorf("strict schema: %s: required must list exactly the declared properties %v, got %v", where, declared, s.Required)
		}
		for _, name := range declared {
			if err := validateStrictNode(s.Properties[name], path+"/properties/"+escapePointerToken(name)); err != nil {
				return err
			}
		}
	}
	if s.Items != nil {
		if err := validateStrictNode(s.Items, path+"/items"); err != nil {
			return err
		}
	}
	for i, b := range s.AnyOf {
		if err := validateStrictNode(b, fmt.Sprintf("%s/anyOf/%d", path, i)); err != nil {
			return err
		}
	}
	return nil
}
