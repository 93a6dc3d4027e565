package registry

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The encoding of tool specs is written by hand because the daemon encodes
// every spec of a turn's tool set when the turn starts, and encoding/json's
// reflection over Schema (sorted property maps, omitzero checks, nested
// marshalers) was a measurable share of the daemon's CPU. The output is
// byte for byte what encoding/json produces for the tagged structs this
// file replaces; schemajson_test.go holds it to that against a reflective
// mirror of the same types (random schemas, FuzzSchemaJSON and
// FuzzAppendJSONString), and builtin_specs_test.go for the built-in tools.

// MarshalJSON encodes s as encoding/json would encode the Schema struct
// with its field tags: fields at their zero value (nil slices and maps,
// empty strings, an empty TypeSet, nil pointers) are left out, while a
// non-nil empty Properties, Enum, Required or AnyOf is written as {} or [].
// A nil s is null. The receiver is a pointer so that encoding/json, which
// meets schemas as *Schema fields, calls it without copying the struct.
func (s *Schema) MarshalJSON() ([]byte, error) {
	return s.appendJSON(make([]byte, 0, s.sizeHint(0)))
}

// appendJSON appends the encoding of s (see MarshalJSON) to b.
//
// Measured with BenchmarkFunctionSpecMarshal (a shell-like function spec of
// 2,540 bytes: eight properties, arrays of strings, an enum, descriptions
// of 200 characters) on 2026-12-03, 2-core AMD EPYC, shared, Go 1.26,
// medians of 5 alternating runs, the change applied on 5418a6f:
//
//	                                          ns/op  B/op  allocs/op
//	reflective (the former tagged structs)     7210  4042         49
//	hand-written (FunctionSpec.MarshalJSON)    2140  3072          1
//	reflective, through json.Marshal(spec)    16430  6795         51
//	hand-written, through json.Marshal(spec)  11010  5809          3
//
// The last two are how the turn loop encodes a spec: encoding/json then
// validates, compacts and copies what MarshalJSON returns, which is most
// of what is left. Reproduce with
//
//	go test ./internal/registry -run '^$' -bench BenchmarkFunctionSpecMarshal -benchmem -count 5
func (s *Schema) appendJSON(b []byte) ([]byte, error) {
	var a schemaAppender
	return a.schema(b, s)
}

// cycleCheckDepth is the nesting past which schemaAppender starts to look
// for a schema that contains itself, as encoding/json does for pointers: a
// cycle is an error there, and would otherwise overflow the stack here.
const cycleCheckDepth = 1000

// schemaAppender carries the recursion state of one encoding.
type schemaAppender struct {
	depth int
	// onPath holds the schemas being encoded, once depth passes
	// cycleCheckDepth.
	onPath map[*Schema]struct{}
}

func (a *schemaAppender) schema(b []byte, s *Schema) ([]byte, error) {
	if s == nil {
		return append(b, "null"...), nil
	}
	// The state is restored on success only: an error ends the encoding.
	a.depth++
	if a.depth > cycleCheckDepth {
		if a.onPath == nil {
			a.onPath = map[*Schema]struct{}{}
		}
		if _, ok := a.onPath[s]; ok {
			return nil, fmt.Errorf("json: unsupported value: encountered a cycle via %T", s)
		}
		a.onPath[s] = struct{}{}
	}

	var err error
	b = append(b, '{')
	open := len(b)
	// field writes a key, after a comma unless it is the first one.
	field := func(b []byte, key string) []byte {
		if len(b) != open {
			b = append(b, ',')
		}
		return append(b, key...)
	}
	if len(s.Type) > 0 {
		b = field(b, `"type":`)
		b = appendTypeSet(b, s.Type)
	}
	if s.Description != "" {
		b = field(b, `"description":`)
		b = appendJSONString(b, s.Description)
	}
	if s.Enum != nil {
		b = field(b, `"enum":[`)
		for i, v := range s.Enum {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendEnumValue(b, v); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if s.Items != nil {
		b = field(b, `"items":`)
		if b, err = a.schema(b, s.Items); err != nil {
			return nil, err
		}
	}
	if s.Properties != nil {
		b = field(b, `"properties":{`)
		// encoding/json writes map keys in plain string order.
		var stack [16]string
		names := stack[:0]
		for name := range s.Properties {
			names = append(names, name)
		}
		slices.Sort(names)
		for i, name := range names {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, name)
			b = append(b, ':')
			if b, err = a.schema(b, s.Properties[name]); err != nil {
				return nil, err
			}
		}
		b = append(b, '}')
	}
	if s.Required != nil {
		b = field(b, `"required":[`)
		for i, name := range s.Required {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, name)
		}
		b = append(b, ']')
	}
	if ap := s.AdditionalProperties; ap != nil {
		b = field(b, `"additionalProperties":`)
		if ap.Schema != nil {
			if b, err = a.schema(b, ap.Schema); err != nil {
				return nil, err
			}
		} else {
			b = strconv.AppendBool(b, ap.Allowed)
		}
	}
	if s.AnyOf != nil {
		b = field(b, `"anyOf":[`)
		for i, branch := range s.AnyOf {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = a.schema(b, branch); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if a.depth > cycleCheckDepth {
		delete(a.onPath, s)
	}
	a.depth--
	return append(b, '}'), nil
}

// sizeHint estimates the encoded size of s, so that a buffer of that
// capacity is seldom grown: its texts plus room for keys and escapes. Past
// a few levels it stops looking (a schema may contain itself).
func (s *Schema) sizeHint(depth int) int {
	if s == nil || depth > 8 {
		return 16
	}
	n := 48 + len(s.Description)*11/10
	for _, v := range s.Enum {
		if str, ok := v.(string); ok {
			n += len(str) + 3
		} else {
			n += 8
		}
	}
	n += s.Items.sizeHint(depth + 1)
	for name, p := range s.Properties {
		n += len(name) + 4 + p.sizeHint(depth+1)
	}
	for _, name := range s.Required {
		n += len(name) + 3
	}
	if s.AdditionalProperties != nil {
		n += 24 + s.AdditionalProperties.Schema.sizeHint(depth+1)
	}
	for _, b := range s.AnyOf {
		n += 1 + b.sizeHint(depth+1)
	}
	return n
}

// appendTypeSet appends t as TypeSet.MarshalJSON writes it: one name as a
// string, several as an array.
func appendTypeSet(b []byte, t TypeSet) []byte {
	if len(t) == 1 {
		return appendJSONString(b, string(t[0]))
	}
	b = append(b, '[')
	for i, n := range t {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, string(n))
	}
	return append(b, ']')
}

// appendEnumValue appends one enum value. Strings, booleans and nil, the
// values enums nearly always hold, are written here; anything else
// (numbers, whose formatting has its own rules, or nested values) is left
// to encoding/json.
func appendEnumValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendJSONString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, raw...), nil
}

// hexDigits are the digits of a \u00XX escape, in lower case as
// encoding/json writes them.
const hexDigits = "0123456789abcdef"

// plainASCII marks the ASCII bytes appendJSONString copies as they are.
var plainASCII = func() (plain [utf8.RuneSelf]bool) {
	for c := range plain {
		plain[c] = c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return plain
}()

// appendJSONString appends s quoted as encoding/json quotes a string with
// HTML escaping on (its default): quote and backslash get a backslash;
// \b, \f, \n, \r and \t their short escapes; other control characters and
// <, > and & a \u00XX escape; U+2028 and U+2029 are escaped; each byte of
// invalid UTF-8 becomes \ufffd. Everything else is copied.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	done := 0 // s[:done] has been written
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plainASCII[c] {
				i++
				continue
			}
			b = append(b, s[done:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, `\b`...)
			case '\f':
				b = append(b, `\f`...)
			case '\n':
				b = append(b, `\n`...)
			case '\r':
				b = append(b, `\r`...)
			case '\t':
				b = append(b, `\t`...)
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			done = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[done:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028':
			b = append(b, s[done:i]...)
			b = append(b, `\u2028`...)
		case r == '\u2029':
			b = append(b, s[done:i]...)
			b = append(b, `\u2029`...)
		default:
			i += size
			continue
		}
		i += size
		done = i
	}
	b = append(b, s[done:]...)
	return append(b, '"')
}
