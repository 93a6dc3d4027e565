package registry

import (
	"encoding/json"
	"math/big"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/appserver/appserver/internal/apperr"
)

// maxRefNodes bounds the number of JSON nodes that $ref expansion may copy
// during one Sanitize call. Past it, remaining $refs are replaced by their
// cycle fallback, so hostile schemas (a chain of definitions that each
// reference the next one twice) cannot blow up exponentially.
const maxRefNodes = 1 << 16

// Sanitize turns an arbitrary JSON Schema (from an MCP server or a dynamic
// tool) into the supported subset, following docs/tools.md §1.6 step by step, and
// decodes the result, dropping keywords outside the subset. It fails with an
// apperr.Invalid error for invalid JSON, for a result that is not a schema
// object, and for a root whose type is exactly "null" ("tool input schema
// must not be a singleton null type").
func Sanitize(input json.RawMessage) (*Schema, error) {
	v, err := decodeJSON(input)
	if err != nil {
		return nil, apperr.Wrap(apperr.Invalid, err, "tool input schema is not valid JSON")
	}
	out, err := schemaFromValue(sanitizeValue(v), "")
	if err != nil {
		return nil, apperr.Wrap(apperr.Invalid, err, "tool input schema is not supported")
	}
	if out.Type.Is(TypeNull) {
		return nil, apperr.New(apperr.Invalid, "tool input schema must not be a singleton null type")
	}
	return out, nil
}

// sanitizeValue runs the raw §1.6 algorithm on a decoded JSON value and
// returns the sanitized value. The input is not modified; it also serves as
// the root for $ref lookups.
func sanitizeValue(v any) any {
	s := &sanitizer{root: v}
	work := deepCopy(v)
	s.sanitize(&work)
	return work
}

type sanitizer struct {
	root   any      // the untouched input, target of $ref pointers
	active []string // pointers being expanded, to detect cycles
	budget int      // nodes copied by $ref expansion so far
	// sizes memoizes the node count of every container in root, keyed by
	// identity (root keeps them alive), so that checking the budget costs
	// O(1) per $ref.
	sizes map[uintptr]int
}

// size returns the number of JSON nodes in target, a value inside root.
func (s *sanitizer) size(target any) int {
	if s.sizes == nil {
		s.sizes = map[uintptr]int{}
		s.measure(s.root)
	}
	switch target.(type) {
	case map[string]any, []any:
		return s.sizes[reflect.ValueOf(target).Pointer()]
	}
	return 1
}

func (s *sanitizer) measure(v any) int {
	n := 1
	switch t := v.(type) {
	case map[string]any:
		for _, e := range t {
			n += s.measure(e)
		}
	case []any:
		for _, e := range t {
			n += s.measure(e)
		}
	default:
		return n
	}
	s.sizes[reflect.ValueOf(v).Pointer()] = n
	return n
}

func (s *sanitizer) sanitize(node *any) {
	switch v := (*node).(type) {
	case bool:
		// Step 1: a boolean schema accepts anything (or nothing); we offer a
		// string.
		*node = map[string]any{"type": "string"}
	case []any:
		// Step 2.
		for i := range v {
			s.sanitize(&v[i])
		}
	case map[string]any:
		s.sanitizeObject(node, v)
	}
}

func (s *sanitizer) sanitizeObject(node *any, m map[string]any) {
	// Step 3.1: $ref into the root.
	if ref, ok := m["$ref"].(string); ok && strings.HasPrefix(ref, "#") {
		if ptr, target, ok := s.resolve(ref); ok {
			siblings := make(map[string]any, len(m))
			for k, v := range m {
				if k != "$ref" {
					siblings[k] = v
				}
			}
			size := s.size(target)
			if slices.Contains(s.active, ptr) || s.budget+size > maxRefNodes {
				fb := refFallback(target)
				mergeInto(fb, siblings)
				var next any = fb
				s.sanitize(&next)
				*node = next
				return
			}
			s.budget += size
			base := asSchemaObject(deepCopy(target))
			mergeInto(base, siblings)
			s.active = append(s.active, ptr)
			var next any = base
			s.sanitize(&next)
			s.active = s.active[:len(s.active)-1]
			*node = next
			return
		}
		// Unresolvable: keep the node and fall through to type inference.
	}

	// Step 3.2: a combiner with exactly one schema replaces the node.
	for _, key := range []string{"oneOf", "anyOf", "allOf"} {
		arr, ok := m[key].([]any)
		if !ok || len(arr) != 1 {
			continue
		}
		if !isSchemaValue(arr[0]) {
			continue
		}
		repl := asSchemaObject(arr[0])
		for k, v := range m {
			if k == key {
				continue
			}
			if _, has := repl[k]; !has {
				repl[k] = v
			}
		}
		var next any = repl
		s.sanitize(&next)
		*node = next
		return
	}

	// Step 3: recurse into child schemas.
	if props, ok := m["properties"].(map[string]any); ok {
		for k := range props {
			v := props[k]
			s.sanitize(&v)
			props[k] = v
		}
	}
	for _, key := range []string{"items", "additionalProperties", "prefixItems", "anyOf"} {
		v, ok := m[key]
		if !ok {
			continue
		}
		if _, isBool := v.(bool); isBool && key == "additionalProperties" {
			continue
		}
		s.sanitize(&v)
		m[key] = v
	}

	// Step 4: const → single-value enum.
	if c, ok := m["const"]; ok {
		delete(m, "const")
		m["enum"] = []any{c}
	}

	// Step 5: normalize type.
	types := normalizeTypes(m["type"])

	// Step 6: a typeless anyOf node is legal as is.
	if len(types) == 0 && present(m, "anyOf") {
		delete(m, "type")
		return
	}

	// Step 7: infer a missing type.
	if len(types) == 0 {
		switch {
		case present(m, "properties") || present(m, "required") || present(m, "additionalProperties"):
			types = []string{"object"}
		case present(m, "items") || present(m, "prefixItems"):
			types = []string{"array"}
		case present(m, "enum") || present(m, "format"):
			types = []string{"string"}
		case present(m, "minimum") || present(m, "maximum") || present(m, "exclusiveMinimum") ||
			present(m, "exclusiveMaximum") || present(m, "multipleOf"):
			types = []string{"number"}
		default:
			types = []string{"string"}
		}
	}

	// Step 8: write the type back.
	m["type"] = typeValue(types)

	// Step 9: fill required children.
	if slices.Contains(types, "object") && !present(m, "properties") {
		m["properties"] = map[string]any{}
	}
	if slices.Contains(types, "array") && !present(m, "items") {
		m["items"] = map[string]any{"type": "string"}
	}
}

// present reports whether m has key with a non-null value; a null keyword
// decodes to "absent", so it is treated as absent throughout.
func present(m map[string]any, key string) bool {
	v, ok := m[key]
	return ok && v != nil
}

// isSchemaValue reports whether v can stand for a schema (an object or a
// boolean schema).
func isSchemaValue(v any) bool {
	switch v.(type) {
	case map[string]any, bool:
		return true
	}
	return false
}

// asSchemaObject returns v as an object schema; a boolean schema becomes {}
// (no constraint) so that sibling keywords can be merged into it.
func asSchemaObject(v any) map[string]any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

// resolve looks up a "#..." reference in the root. It returns the decoded
// pointer (the cycle-detection key) and the target, which must be a schema
// value.
func (s *sanitizer) resolve(ref string) (string, any, bool) {
	frag := ref[1:]
	if un, err := url.PathUnescape(frag); err == nil {
		frag = un
	}
	cur := s.root
	if frag != "" {
		if !strings.HasPrefix(frag, "/") {
			return "", nil, false
		}
		for _, tok := range strings.Split(frag[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch c := cur.(type) {
			case map[string]any:
				next, ok := c[tok]
				if !ok {
					return "", nil, false
				}
				cur = next
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(c) || (len(tok) > 1 && tok[0] == '0') {
					return "", nil, false
				}
				cur = c[i]
			default:
				return "", nil, false
			}
		}
	}
	if !isSchemaValue(cur) {
		return "", nil, false
	}
	return frag, cur, true
}

// refFallback is the replacement for a $ref that would recurse forever,
// chosen from the shape of its target.
func refFallback(target any) map[string]any {
	m, _ := target.(map[string]any)
	types := typeNames(m["type"])
	switch {
	case slices.Contains(types, "object") || present(m, "properties") || present(m, "required") || present(m, "additionalProperties"):
		return map[string]any{"type": "object", "properties": map[string]any{}}
	case slices.Contains(types, "array") || present(m, "items") || present(m, "prefixItems"):
		return map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
	case slices.Contains(types, "number"):
		return map[string]any{"type": "number"}
	case slices.Contains(types, "integer"):
		return map[string]any{"type": "integer"}
	case slices.Contains(types, "boolean"):
		return map[string]any{"type": "boolean"}
	default:
		return map[string]any{"type": "string"}
	}
}

// typeNames returns the string members of a raw "type" value.
func typeNames(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// normalizeTypes keeps the known type names of a raw "type", in order and
// without duplicates.
func normalizeTypes(v any) []string {
	var out []string
	for _, n := range typeNames(v) {
		if knownType(n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// typeValue encodes a type set: one name as a string, several as an array.
func typeValue(types []string) any {
	if len(types) == 1 {
		return types[0]
	}
	arr := make([]any, len(types))
	for i, t := range types {
		arr[i] = t
	}
	return arr
}

// mergeInto folds the sibling keywords of a $ref (overlay) into the resolved
// target (base), following the merge rules of docs/tools.md §1.6. base is owned by
// the caller and modified in place; overlay is only read.
func mergeInto(base, overlay map[string]any) {
	for k, ov := range overlay {
		if k == "$ref" {
			continue
		}
		bv, ok := base[k]
		if !ok {
			base[k] = deepCopy(ov)
			continue
		}
		if reflect.DeepEqual(bv, ov) {
			continue
		}
		switch k {
		case "required":
			ba, bok := bv.([]any)
			oa, ook := ov.([]any)
			if bok && ook {
				out := slices.Clone(ba)
				for _, e := range oa {
					if !slices.ContainsFunc(out, func(x any) bool { return reflect.DeepEqual(x, e) }) {
						out = append(out, deepCopy(e))
					}
				}
				base[k] = out
			}
		case "properties":
			bp, bok := bv.(map[string]any)
			op, ook := ov.(map[string]any)
			if bok && ook {
				for name, opv := range op {
					bpv, exists := bp[name]
					if !exists {
						bp[name] = deepCopy(opv)
						continue
					}
					bm, bIsObj := bpv.(map[string]any)
					om, oIsObj := opv.(map[string]any)
					if bIsObj && oIsObj {
						mergeInto(bm, om)
					}
				}
			}
		case "type":
			bt, ot := typeNames(bv), typeNames(ov)
			var inter []string
			for _, t := range bt {
				if slices.Contains(ot, t) && !slices.Contains(inter, t) {
					inter = append(inter, t)
				}
			}
			if len(inter) > 0 {
				base[k] = typeValue(inter)
			}
		case "additionalProperties":
			bb, bIsBool := bv.(bool)
			ob, oIsBool := ov.(bool)
			switch {
			case (bIsBool && !bb) || (oIsBool && !ob):
				base[k] = false
			case bIsBool && bb:
				base[k] = deepCopy(ov)
			case oIsBool && ob:
				// true on the overlay yields the base side.
			default:
				bm, bIsObj := bv.(map[string]any)
				om, oIsObj := ov.(map[string]any)
				if bIsObj && oIsObj {
					mergeInto(bm, om)
				}
			}
		case "minimum", "exclusiveMinimum":
			if c, ok := compareNumbers(ov, bv); ok && c > 0 {
				base[k] = ov
			}
		case "maximum", "exclusiveMaximum":
			if c, ok := compareNumbers(ov, bv); ok && c < 0 {
				base[k] = ov
			}
		default:
			bm, bIsObj := bv.(map[string]any)
			om, oIsObj := ov.(map[string]any)
			if bIsObj && oIsObj {
				mergeInto(bm, om)
			}
			// Other scalars and arrays keep the base value.
		}
	}
}

// compareNumbers compares two JSON numbers exactly; ok is false when either
// is not a number.
func compareNumbers(a, b any) (int, bool) {
	fa, ok := toBigFloat(a)
	if !ok {
		return 0, false
	}
	fb, ok := toBigFloat(b)
	if !ok {
		return 0, false
	}
	return fa.Cmp(fb), true
}

func toBigFloat(v any) (*big.Float, bool) {
	var s string
	switch n := v.(type) {
	case json.Number:
		s = n.String()
	case float64:
		return big.NewFloat(n), true
	default:
		return nil, false
	}
	f, _, err := big.ParseFloat(s, 10, 256, big.ToNearestEven)
	if err != nil {
		return nil, false
	}
	return f, true
}

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(t))
		for i, e := range t {
			a[i] = deepCopy(e)
		}
		return a
	default:
		return v
	}
}
