package dynamic

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Argument validation.
//
// Arguments are checked against the schema the client registered, not
// against the sanitized copy sent to the model: sanitizing is lossy in ways
// that would reject arguments the client accepts (a typeless node becomes
// "string", a boolean schema `true` becomes "string", an enum of numbers
// without a type gets type "string"). The validator therefore implements the
// subset the registry models — type (one name or several), properties,
// required, additionalProperties, items, enum, anyOf — plus const, allOf,
// oneOf (checked like anyOf), prefixItems/array-form items and local "#..."
// $refs, and ignores every other keyword. It is never stricter than the
// client's schema for the keywords it knows, and it gives up (accepts) on
// pathological schemas rather than spend unbounded time.

const (
	// maxValidateDepth bounds the recursion of one validation; past it the
	// value is accepted.
	maxValidateDepth = 256
	// maxValidateSteps bounds the schema nodes visited by one validation
	// (anyOf inside anyOf is exponential); past it the value is accepted.
	maxValidateSteps = 1 << 18
)

// argValidator validates call arguments against one input schema.
type argValidator struct {
	root any
}

// newArgValidator decodes a schema for validation.
func newArgValidator(schema []byte) (*argValidator, error) {
	root, err := decodeJSONValue(schema)
	if err != nil {
		return nil, err
	}
	return &argValidator{root: root}, nil
}

// ArgumentsError is an argument validation failure, answered to the model
// so that it can retry.
type ArgumentsError struct {
	// Tool is the tool's display name.
	Tool string
	// Path is the JSON pointer of the offending value, "" for the root.
	Path string
	// Reason says what is wrong.
	Reason string
}

// Error returns "invalid arguments for <tool>: <path>: <reason>", without
// the path for the root value.
func (e *ArgumentsError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("invalid arguments for %s: %s", e.Tool, e.Reason)
	}
	return fmt.Sprintf("invalid arguments for %s: %s: %s", e.Tool, e.Path, e.Reason)
}

type violation struct {
	path   string
	reason string
}

func (v *argValidator) validate(args any) error {
	s := &validatorState{root: v.root}
	if vio := s.check(v.root, args, "", 0); vio != nil {
		return &ArgumentsError{Path: vio.path, Reason: vio.reason}
	}
	return nil
}

type validatorState struct {
	root  any
	steps int
}

// check validates val at path against schema; nil means valid.
func (s *validatorState) check(schema, val any, path string, depth int) *violation {
	s.steps++
	if depth > maxValidateDepth || s.steps > maxValidateSteps {
		return nil
	}
	switch sc := schema.(type) {
	case bool:
		if !sc {
			return &violation{path, "no value is allowed here"}
		}
		return nil
	case map[string]any:
		return s.checkObject(sc, val, path, depth)
	default:
		return nil
	}
}

func (s *validatorState) checkObject(sc map[string]any, val any, path string, depth int) *violation {
	if ref, ok := sc["$ref"].(string); ok && strings.HasPrefix(ref, "#") {
		if target, ok := resolvePointer(s.root, ref); ok {
			if vio := s.check(target, val, path, depth+1); vio != nil {
				return vio
			}
		}
	}
	if t, ok := sc["type"]; ok && !typeAllows(t, val) {
		return &violation{path, fmt.Sprintf("expected %s, got %s", strings.Join(typeNames(t), " or "), kindOf(val))}
	}
	if c, ok := sc["const"]; ok && !jsonEqual(c, val) {
		return &violation{path, "must be " + preview(c)}
	}
	if e, ok := sc["enum"].([]any); ok {
		found := false
		for _, allowed := range e {
			if jsonEqual(allowed, val) {
				found = true
				break
			}
		}
		if !found {
			return &violation{path, "must be one of " + previewList(e)}
		}
	}
	switch v := val.(type) {
	case map[string]any:
		if vio := s.checkProperties(sc, v, path, depth); vio != nil {
			return vio
		}
	case []any:
		if vio := s.checkItems(sc, v, path, depth); vio != nil {
			return vio
		}
	}
	if all, ok := sc["allOf"].([]any); ok {
		for _, branch := range all {
			if vio := s.check(branch, val, path, depth+1); vio != nil {
				return vio
			}
		}
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		branches, ok := sc[key].([]any)
		if !ok || len(branches) == 0 {
			continue
		}
		var first *violation
		matched := false
		for _, branch := range branches {
			vio := s.check(branch, val, path, depth+1)
			if vio == nil {
				matched = true
				break
			}
			if first == nil {
				first = vio
			}
		}
		if !matched {
			if len(branches) == 1 {
				return first
			}
			return &violation{path, fmt.Sprintf("does not match any of the %d allowed schemas (first: %s)", len(branches), first.describe())}
		}
	}
	return nil
}

func (s *validatorState) checkProperties(sc map[string]any, obj map[string]any, path string, depth int) *violation {
	props, _ := sc["properties"].(map[string]any)
	if req, ok := sc["required"].([]any); ok {
		for _, r := range req {
			name, ok := r.(string)
			if !ok {
				continue
			}
			if _, present := obj[name]; !present {
				return &violation{path, fmt.Sprintf("missing required property %q", name)}
			}
		}
	}
	// Properties are checked in a stable order so the reported error does
	// not depend on map iteration.
	var small [8]string
	for _, name := range appendSortedKeys(small[:0], obj) {
		pv := obj[name]
		child := path + "/" + escapePointer(name)
		if ps, declared := props[name]; declared {
			if vio := s.check(ps, pv, child, depth+1); vio != nil {
				return vio
			}
			continue
		}
		if _, hasPatterns := sc["patternProperties"]; hasPatterns {
			continue // not modelled: do not judge extra properties
		}
		switch ap := sc["additionalProperties"].(type) {
		case bool:
			if !ap {
				return &violation{path, fmt.Sprintf("unexpected property %q", name)}
			}
		case map[string]any:
			if vio := s.check(ap, pv, child, depth+1); vio != nil {
				return vio
			}
		}
	}
	return nil
}

func (s *validatorState) checkItems(sc map[string]any, arr []any, path string, depth int) *violation {
	prefix, _ := sc["prefixItems"].([]any)
	if tuple, ok := sc["items"].([]any); ok && prefix == nil {
		prefix = tuple // draft-04..2019 array form of items
	}
	for i, el := range arr {
		child := path + "/" + strconv.Itoa(i)
		if i < len(prefix) {
			if vio := s.check(prefix[i], el, child, depth+1); vio != nil {
				return vio
			}
			continue
		}
		if items, ok := sc["items"]; ok {
			if _, isTuple := items.([]any); isTuple {
				continue
			}
			if vio := s.check(items, el, child, depth+1); vio != nil {
				return vio
			}
		}
	}
	return nil
}

// typeNames returns the known JSON Schema type names of a "type" value.
func typeNames(t any) []string {
	var names []string
	add := func(v any) {
		if n, ok := v.(string); ok && knownType(n) {
			names = append(names, n)
		}
	}
	switch t := t.(type) {
	case []any:
		for _, e := range t {
			add(e)
		}
	default:
		add(t)
	}
	return names
}

// typeAllows reports whether val matches a "type" value: one of its known
// type names, or any value when it names none. It is typeNames and a match
// without building the list, which only an error message needs.
func typeAllows(t any, val any) bool {
	known := false
	check := func(v any) bool {
		n, ok := v.(string)
		if !ok || !knownType(n) {
			return false
		}
		known = true
		return matchesType(n, val)
	}
	if list, ok := t.([]any); ok {
		for _, e := range list {
			if check(e) {
				return true
			}
		}
	} else if check(t) {
		return true
	}
	return !known
}

func knownType(n string) bool {
	switch n {
	case "string", "number", "integer", "boolean", "object", "array", "null":
		return true
	}
	return false
}

func matchesType(name string, val any) bool {
	switch name {
	case "null":
		return val == nil
	case "boolean":
		_, ok := val.(bool)
		return ok
	case "string":
		_, ok := val.(string)
		return ok
	case "number":
		_, ok := val.(json.Number)
		return ok
	case "integer":
		n, ok := val.(json.Number)
		if !ok {
			return false
		}
		if plainInteger(n) {
			return true // what big.Rat would say, without its allocations
		}
		r, ok := new(big.Rat).SetString(string(n))
		return ok && r.IsInt()
	case "object":
		_, ok := val.(map[string]any)
		return ok
	case "array":
		_, ok := val.([]any)
		return ok
	}
	return false
}

// plainInteger reports whether n is written as an integer: an optional
// minus sign and digits only.
func plainInteger(n json.Number) bool {
	s := strings.TrimPrefix(string(n), "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func kindOf(val any) string {
	switch v := val.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if matchesType("integer", v) {
			return "integer"
		}
		return "number"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return fmt.Sprintf("%T", val)
}

// jsonEqual compares two decoded JSON values; numbers compare by value.
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case bool:
		bb, ok := b.(bool)
		return ok && a == bb
	case string:
		bs, ok := b.(string)
		return ok && a == bs
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok {
			return false
		}
		if a == bn {
			return true
		}
		ra, oka := new(big.Rat).SetString(string(a))
		rb, okb := new(big.Rat).SetString(string(bn))
		return oka && okb && ra.Cmp(rb) == 0
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !jsonEqual(a[i], bs[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, av := range a {
			bv, ok := bm[k]
			if !ok || !jsonEqual(av, bv) {
				return false
			}
		}
		return true
	}
	return false
}

// resolvePointer resolves a "#/a/b" JSON Pointer (URI fragment form) in
// root.
func resolvePointer(root any, ref string) (any, bool) {
	frag := strings.TrimPrefix(ref, "#")
	if unescaped, err := url.PathUnescape(frag); err == nil {
		frag = unescaped
	}
	if frag == "" {
		return root, true
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, false // named anchors are not supported
	}
	cur := root
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func (v *violation) describe() string {
	if v.path == "" {
		return v.reason
	}
	return v.path + ": " + v.reason
}

func preview(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

func previewList(vs []any) string {
	const limit = 10
	parts := make([]string, 0, min(len(vs), limit)+1)
	for i, v := range vs {
		if i == limit {
			parts = append(parts, fmt.Sprintf("… (%d more)", len(vs)-limit))
			break
		}
		parts = append(parts, preview(v))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// appendSortedKeys appends the keys of m to keys, sorted; callers pass a
// small array of their own so that typical argument objects need no
// allocation.
func appendSortedKeys(keys []string, m map[string]any) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
