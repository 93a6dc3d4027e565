// Package jsonscan is a strict JSON scanner: it finds where values end
// without decoding them. It accepts exactly what encoding/json accepts
// (up to MaxDepth of nesting), so that callers with fast paths of their
// own can leave anything it rejects to encoding/json for the error.
package jsonscan

// MaxDepth bounds the nesting Value and Object follow; deeper documents are
// rejected, for encoding/json (whose own limit is higher) to decide.
const MaxDepth = 512

// Space returns the index of the first byte at or after i that is not
// JSON whitespace.
func Space(b []byte, i int) int {
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

// Value returns the end of the value starting at b[i].
func Value(b []byte, i int) (int, bool) { return value(b, i, 1) }

func value(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		end, _, _, ok := String(b, i)
		return end, ok
	case c == '{' || c == '[':
		end, _, ok := composite(b, i, depth, nil, false)
		return end, ok
	case c == '-' || c >= '0' && c <= '9':
		return Number(b, i)
	case c == 't':
		return Literal(b, i, "true")
	case c == 'f':
		return Literal(b, i, "false")
	case c == 'n':
		return Literal(b, i, "null")
	}
	return i, false
}

// Member is one member of a JSON object: its key as written between the
// quotes and its value's bytes.
type Member struct {
	Key, Value []byte
	// Plain is set when the key has no escape and only ASCII bytes, so
	// that its bytes are its value.
	Plain bool
}

// Object appends the members of data to dst, in order. ok is false unless
// data is one valid JSON object, with only whitespace around it.
func Object(data []byte, dst []Member) ([]Member, bool) {
	i := Space(data, 0)
	if i >= len(data) || data[i] != '{' {
		return dst, false
	}
	end, dst, ok := composite(data, i, 1, dst, true)
	return dst, ok && Space(data, end) == len(data)
}

// composite returns the end of the object or array starting at b[i],
// with its members appended to members when collect is set.
func composite(b []byte, i, depth int, members []Member, collect bool) (int, []Member, bool) {
	if depth > MaxDepth {
		return i, members, false
	}
	object := b[i] == '{'
	closing := byte(']')
	if object {
		closing = '}'
	}
	i = Space(b, i+1)
	if i < len(b) && b[i] == closing {
		return i + 1, members, true
	}
	for {
		var key []byte
		plain, ok := false, false
		if object {
			if i >= len(b) || b[i] != '"' {
				return i, members, false
			}
			start := i
			var escaped, high bool
			if i, escaped, high, ok = String(b, i); !ok {
				return i, members, false
			}
			key, plain = b[start+1:i-1], !escaped && !high
			i = Space(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, members, false
			}
			i = Space(b, i+1)
		}
		start := i
		if i, ok = value(b, i, depth+1); !ok {
			return i, members, false
		}
		if collect {
			members = append(members, Member{Key: key, Value: b[start:i], Plain: plain})
		}
		i = Space(b, i)
		if i >= len(b) {
			return i, members, false
		}
		switch b[i] {
		case ',':
			i = Space(b, i+1)
		case closing:
			return i + 1, members, true
		default:
			return i, members, false
		}
	}
}

// String returns the end of the string starting at b[i] (past its closing
// quote), whether it holds an escape and whether it holds a byte that is
// not ASCII.
func String(b []byte, i int) (end int, escaped, high, ok bool) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, high, true
		case c < 0x20:
			return i, escaped, high, false
		case c >= 0x80:
			high = true
		case c == '\\':
			escaped = true
			i++
			if i >= len(b) {
				return i, escaped, high, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return i, escaped, high, false
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return i, escaped, high, false
					}
				}
				i += 4
			default:
				return i, escaped, high, false
			}
		}
	}
	return i, escaped, high, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// Number returns the end of the number starting at b[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func Number(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
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
		j := digits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// Literal returns the end of lit (true, false or null) at b[i].
func Literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}
