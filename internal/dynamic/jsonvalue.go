package dynamic

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/appserver/appserver/internal/jsonscan"
)

// Every dynamic tool call decodes its arguments into a generic value for
// schema validation. A json.Decoder (the only way to get json.Number out of
// encoding/json) costs a decoder, a reader and a 512-byte read buffer per
// call, more than the value itself for typical arguments. valueDecoder
// decodes straight from the bytes instead. It produces exactly what the
// json.Decoder does; whenever it meets anything it does not handle itself
// (a malformed document, escapes inside a string) it either defers to
// encoding/json for that piece or gives up, and decodeJSONValue then runs
// the json.Decoder, whose result and error message stand.

// decodeJSONValue decodes exactly one JSON value, numbers as json.Number.
func decodeJSONValue(data []byte) (any, error) {
	d := valueDecoder{data: data}
	if v, ok := d.document(); ok {
		return v, nil
	}
	return decodeJSONValueStd(data)
}

// decodeJSONValueStd is decodeJSONValue with a json.Decoder.
func decodeJSONValueStd(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing characters after the JSON value")
	}
	return v, nil
}

// maxValueDepth is encoding/json's nesting limit; deeper documents are
// left to it (it rejects them).
const maxValueDepth = 10000

// valueDecoder decodes one JSON document into map[string]any, []any,
// string, json.Number, bool and nil, as encoding/json does with UseNumber.
// Its methods report false when the document is not one they decode.
type valueDecoder struct {
	data  []byte
	off   int
	depth int
	// spaced is set once insignificant whitespace was skipped, i.e. the
	// document is not compact.
	spaced bool
}

// document decodes the whole input: one value and nothing but whitespace
// around it.
func (d *valueDecoder) document() (any, bool) {
	v, ok := d.value()
	if !ok {
		return nil, false
	}
	d.skipSpace()
	return v, d.off == len(d.data)
}

func (d *valueDecoder) skipSpace() {
	i := jsonscan.Space(d.data, d.off)
	d.spaced = d.spaced || i > d.off
	d.off = i
}

func (d *valueDecoder) value() (any, bool) {
	d.skipSpace()
	if d.off >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.off]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		if s, ok := d.string(); ok {
			return s, true
		}
		return nil, false
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	}
	return nil, false
}

func (d *valueDecoder) literal(lit string) bool {
	end, ok := jsonscan.Literal(d.data, d.off, lit)
	d.off = end
	return ok
}

func (d *valueDecoder) object() (any, bool) {
	if d.depth++; d.depth > maxValueDepth {
		return nil, false
	}
	d.off++ // {
	m := map[string]any{}
	d.skipSpace()
	if d.off < len(d.data) && d.data[d.off] == '}' {
		d.off++
		d.depth--
		return m, true
	}
	for {
		d.skipSpace()
		if d.off >= len(d.data) || d.data[d.off] != '"' {
			return nil, false
		}
		k, ok := d.string()
		if !ok {
			return nil, false
		}
		d.skipSpace()
		if d.off >= len(d.data) || d.data[d.off] != ':' {
			return nil, false
		}
		d.off++
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		m[k] = v // a repeated key keeps its last value, as in encoding/json
		d.skipSpace()
		if d.off >= len(d.data) {
			return nil, false
		}
		switch d.data[d.off] {
		case ',':
			d.off++
		case '}':
			d.off++
			d.depth--
			return m, true
		default:
			return nil, false
		}
	}
}

func (d *valueDecoder) array() (any, bool) {
	if d.depth++; d.depth > maxValueDepth {
		return nil, false
	}
	d.off++             // [
	a := make([]any, 0) // [] decodes to an empty, non-nil slice
	d.skipSpace()
	if d.off < len(d.data) && d.data[d.off] == ']' {
		d.off++
		d.depth--
		return a, true
	}
	for {
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		a = append(a, v)
		d.skipSpace()
		if d.off >= len(d.data) {
			return nil, false
		}
		switch d.data[d.off] {
		case ',':
			d.off++
		case ']':
			d.off++
			d.depth--
			return a, true
		default:
			return nil, false
		}
	}
}

// string decodes the string starting at d.off, which holds its opening
// quote, as encoding/json does (jsonscan.Unquote).
func (d *valueDecoder) string() (string, bool) {
	start := d.off
	end, escaped, high, ok := jsonscan.String(d.data, start)
	if !ok {
		return "", false
	}
	d.off = end
	return jsonscan.Unquote(d.data[start+1:end-1], escaped, high), true
}

// number decodes a number literal (JSON grammar) as json.Number.
func (d *valueDecoder) number() (any, bool) {
	start := d.off
	end, ok := jsonscan.Number(d.data, start)
	if !ok {
		return nil, false
	}
	d.off = end
	return json.Number(d.data[start:end]), true
}
