package model

// A strict JSON scanner that splits an object into its members without
// decoding them, for the stream events decoded on every response
// (quickEvent). It accepts exactly what encoding/json accepts as one
// object, so that whatever it rejects can go to encoding/json for the
// error.

// jsonMember is one member of a JSON object: its key as written between
// the quotes (with escapes, if any, left as they are) and its value's
// bytes.
type jsonMember struct {
	key, value []byte
	escaped    bool // the key holds a backslash escape
}

// maxScanDepth bounds nesting; deeper values are left to encoding/json,
// whose own limit is higher.
const maxScanDepth = 512

// objectMembers appends the members of data to dst, in order. ok is false
// unless data is one valid JSON object, with only whitespace around it.
func objectMembers(data []byte, dst []jsonMember) ([]jsonMember, bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return dst, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return dst, skipSpace(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return dst, false
		}
		end, escaped, ok := scanString(data, i)
		if !ok {
			return dst, false
		}
		key := data[i+1 : end-1]
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return dst, false
		}
		i = skipSpace(data, i+1)
		start := i
		if i, ok = scanValue(data, i, 1); !ok {
			return dst, false
		}
		dst = append(dst, jsonMember{key: key, value: data[start:i], escaped: escaped})
		i = skipSpace(data, i)
		if i >= len(data) {
			return dst, false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return dst, skipSpace(data, i+1) == len(data)
		default:
			return dst, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanValue returns the end of the value starting at b[i].
func scanValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		end, _, ok := scanString(b, i)
		return end, ok
	case c == '{' || c == '[':
		return scanComposite(b, i, depth)
	case c == '-' || c >= '0' && c <= '9':
		return scanNumber(b, i)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	}
	return i, false
}

// scanComposite returns the end of the object or array starting at b[i].
func scanComposite(b []byte, i, depth int) (int, bool) {
	if depth >= maxScanDepth {
		return i, false
	}
	object := b[i] == '{'
	closing := byte(']')
	if object {
		closing = '}'
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == closing {
		return i + 1, true
	}
	for {
		var ok bool
		if object {
			if i >= len(b) || b[i] != '"' {
				return i, false
			}
			if i, _, ok = scanString(b, i); !ok {
				return i, false
			}
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, false
			}
			i = skipSpace(b, i+1)
		}
		if i, ok = scanValue(b, i, depth+1); !ok {
			return i, false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case closing:
			return i + 1, true
		default:
			return i, false
		}
	}
}

// scanString returns the end of the string starting at b[i] (past its
// closing quote) and whether it holds an escape.
func scanString(b []byte, i int) (end int, escaped, ok bool) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, true
		case c < 0x20:
			return i, escaped, false
		case c == '\\':
			escaped = true
			i++
			if i >= len(b) {
				return i, escaped, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return i, escaped, false
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return i, escaped, false
					}
				}
				i += 4
			default:
				return i, escaped, false
			}
		}
	}
	return i, escaped, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanNumber returns the end of the number starting at b[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func scanLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}
