package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// The NUL escape of the SQL backends. PostgreSQL refuses the character
// U+0000 in jsonb and text ("unsupported Unicode escape sequence"), yet a
// command's output, a file a tool reads or a model's call arguments may hold
// it. A JSON object holding U+0000 anywhere (a key or a string value, at any
// depth) is therefore stored escaped, and read back as it was:
//
//   - the object gets the member "appserver:nul":1, first, as the mark that
//     its strings are escaped (values without it are stored verbatim, so
//     nothing stored before the escape existed reads differently);
//   - in every string of a marked object, U+2400 (␀, SYMBOL FOR NULL)
//     becomes "␀␀" and U+0000 becomes "␀0".
//
// Reading removes the mark and reverses the substitution. The escaped text
// stays searchable around the NUL (the search indexes read the stored
// text). Only objects are escaped: every JSON value the store keeps is
// one, and Batch.Validate refuses a NUL in anything else.

// nulMark is the member that marks an escaped object; Batch.Validate
// refuses it in what a writer gives.
const nulMark = "appserver:nul"

// nulMarkJSON is the mark's key as it appears in stored JSON.
var nulMarkJSON = []byte(`"` + nulMark + `"`)

// nulEsc is the escape character.
const nulEsc = '\u2400'

var (
	nulStuff   = strings.NewReplacer(string(nulEsc), string(nulEsc)+string(nulEsc), "\x00", string(nulEsc)+"0")
	nulUnstuff = strings.NewReplacer(string(nulEsc)+string(nulEsc), string(nulEsc), string(nulEsc)+"0", "\x00")
)

// EscapeNUL returns raw as the SQL backends store it: unchanged unless it
// is a JSON object holding U+0000, then escaped and marked.
func EscapeNUL(raw []byte) ([]byte, error) {
	if !HasNULEscape(raw) {
		return raw, nil
	}
	if first := bytes.TrimLeft(raw, " \t\r\n"); len(first) == 0 || first[0] != '{' {
		return nil, errors.New("a JSON value holding U+0000 must be an object")
	}
	return rewriteJSON(raw, nulStuff.Replace, true)
}

// UnescapeNUL returns a stored JSON value as it was written: a marked
// object unescaped, anything else unchanged.
func UnescapeNUL(raw []byte) []byte {
	if !bytes.Contains(raw, nulMarkJSON) {
		return raw
	}
	out, err := rewriteJSON(raw, nulUnstuff.Replace, false)
	if err != nil {
		return raw
	}
	return out
}

// rewriteJSON re-encodes the JSON value raw compactly with every string
// (keys included) passed through f, keeping members in their order. mark
// adds the NUL mark as the top-level object's first member; without it, a
// top-level mark is dropped, and a value without one is an error (the
// caller keeps it as it is).
func rewriteJSON(raw []byte, f func(string) string, mark bool) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type level struct {
		obj bool
		n   int // tokens so far: keys and values in an object, values in an array
	}
	var (
		out    = make([]byte, 0, len(raw)+32)
		stack  []level
		str    strings.Builder
		enc    = json.NewEncoder(&str)
		marked bool
	)
	enc.SetEscapeHTML(false)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			out = append(out, byte(d))
			stack = stack[:len(stack)-1]
			continue
		}
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			switch {
			case top.obj && top.n%2 == 1:
				out = append(out, ':')
			case top.n > 0:
				out = append(out, ',')
			}
			if !mark && len(stack) == 1 && top.obj && top.n%2 == 0 && tok == nulMark {
				// The mark: skip it and its value (a scalar).
				if _, err := dec.Token(); err != nil {
					return nil, err
				}
				if top.n > 0 {
					out = out[:len(out)-1] // the comma written for it
				}
				marked = true
				continue
			}
			top.n++
		}
		switch v := tok.(type) {
		case json.Delim:
			out = append(out, byte(v))
			stack = append(stack, level{obj: v == '{'})
			if mark && len(stack) == 1 && v == '{' {
				out = append(out, `"`+nulMark+`":1`...)
				stack[0].n = 2
			}
		case string:
			str.Reset()
			if err := enc.Encode(f(v)); err != nil {
				return nil, err
			}
			out = append(out, strings.TrimSuffix(str.String(), "\n")...)
		case json.Number:
			out = append(out, v...)
		case bool:
			if v {
				out = append(out, "true"...)
			} else {
				out = append(out, "false"...)
			}
		case nil:
			out = append(out, "null"...)
		}
	}
	if !mark && !marked {
		return nil, errors.New("not marked")
	}
	return out, nil
}
