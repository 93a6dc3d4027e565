package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

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
		end, _, ok := composite(b, i, depth, nil, false, nil)
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
func Object(data []byte, dst []Member) ([]Member, bool) { return whole(data, '{', dst, nil) }

// ValueFunc reads the value starting at b[i], of the member named key (as
// written between its quotes; nil for an array's element), in place of
// the scanner: it returns the value's end, or ok false to reject the
// document. It must accept only valid JSON values; i may be len(b), in a
// document cut short.
type ValueFunc func(key, b []byte, i int) (end int, ok bool)

// ObjectFunc is Object with each member's value read by read, for a
// caller that decodes some values in the same pass.
func ObjectFunc(data []byte, dst []Member, read ValueFunc) ([]Member, bool) {
	return whole(data, '{', dst, read)
}

// whole appends the members or elements of data, one object or array
// (opening with open) with only whitespace around it.
func whole(data []byte, open byte, dst []Member, read ValueFunc) ([]Member, bool) {
	i := Space(data, 0)
	if i >= len(data) || data[i] != open {
		return dst, false
	}
	end, dst, ok := composite(data, i, 1, dst, true, read)
	return dst, ok && Space(data, end) == len(data)
}

// composite returns the end of the object or array starting at b[i],
// with its members appended to members when collect is set; read, when
// not nil, reads its members' values.
func composite(b []byte, i, depth int, members []Member, collect bool, read ValueFunc) (int, []Member, bool) {
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
		if read != nil {
			i, ok = read(key, b, i)
		} else {
			i, ok = value(b, i, depth+1)
		}
		if !ok {
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
func String(b []byte, i int) (end int, escaped, high, ok bool) { return stringAt(b, i, true) }

// stringAt is String, reading eight bytes at a time where it can when
// words is set, one at a time otherwise (what the tests hold it to).
func stringAt(b []byte, i int, words bool) (end int, escaped, high, ok bool) {
	for i++; i < len(b); i++ {
		// Eight bytes at a time past the ones that need no look: the
		// strings of a model request (instructions, tool descriptions,
		// the history's text) are most of its bytes. Once a byte past
		// ASCII is seen, such bytes need no look either. BenchmarkString
		// (4 KB of text, 2-core machine): 2.4–2.8 GB/s against 0.8–1.0
		// GB/s for the byte-wise loop it replaced; BenchmarkDecodeRequest of
		// internal/model/fakemodel, mostly short strings, 157–183
		// against 193–225 µs with that loop.
		hi := uint64(highBits)
		if high {
			hi = 0
		}
		for words && i+8 <= len(b) {
			if s := special(binary.LittleEndian.Uint64(b[i:]), hi); s != 0 {
				i += bits.TrailingZeros64(s) / 8 // the first hit is a true one
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
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

const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

// special is not zero when one of the eight bytes of x is a quote, a
// backslash or a control character, or has a bit of hi (highBits, or 0
// to let bytes past ASCII through). The classic word tests (Hacker's
// Delight 6-1): a zero byte of x^c for a byte equal to c, and
// (x - 0x20…) &^ x for a byte below 0x20. Only bytes past the first hit
// (in little-endian order) may show as false hits.
func special(x, hi uint64) uint64 {
	quote := x ^ ('"' * lowBits)
	backslash := x ^ ('\\' * lowBits)
	return ((quote-lowBits)&^quote|(backslash-lowBits)&^backslash|(x-0x20*lowBits)&^x)&highBits | x&hi
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

// ObjectAt appends the members of the object starting at b[i] to dst and
// returns its end (past its closing brace), for a caller walking a larger
// document in one pass. Its nesting is counted from b[i]: called from a
// ValueFunc, it allows MaxDepth levels below the caller's.
func ObjectAt(b []byte, i int, dst []Member) (int, []Member, bool) {
	if i >= len(b) || b[i] != '{' {
		return i, dst, false
	}
	return composite(b, i, 1, dst, true, nil)
}

// ArrayAt returns the end of the array starting at b[i], each of its
// elements read by read (nesting counted from b[i], as for ObjectAt).
func ArrayAt(b []byte, i int, read ValueFunc) (int, bool) {
	if i >= len(b) || b[i] != '[' {
		return i, false
	}
	end, _, ok := composite(b, i, 1, nil, false, read)
	return end, ok
}

// Array appends the elements of data to dst, in order, as Members with
// no key. ok is false unless data is one valid JSON array, with only
// whitespace around it.
func Array(data []byte, dst []Member) ([]Member, bool) { return whole(data, '[', dst, nil) }

// Pick puts the values of the members named in names into vals (nil when
// absent), in the order of names. It reports false for any key that
// encoding/json could match to one of names otherwise than by its bytes:
// a key with an escape or a non-ASCII byte (it folds case with Unicode
// rules, so "ſ" matches "s"), a repeated name, a name in another letter
// case.
func Pick(members []Member, names []string, vals [][]byte) bool {
	for _, m := range members {
		if !m.Plain {
			return false
		}
		for i, n := range names {
			if string(m.Key) == n {
				if vals[i] != nil {
					return false
				}
				vals[i] = m.Value
				break
			}
			if len(m.Key) == len(n) && bytes.EqualFold(m.Key, []byte(n)) {
				return false
			}
		}
	}
	return true
}

// PickObject is Object and then Pick: it reports false unless data is one
// valid JSON object whose keys Pick accepts.
func PickObject(data []byte, names []string, vals [][]byte) bool {
	var buf [32]Member
	members, ok := Object(data, buf[:0])
	return ok && Pick(members, names, vals)
}

// PlainString returns the string b (one whole JSON string) holds when it
// has no escapes and only ASCII, so that its bytes are its value.
func PlainString(b []byte) (string, bool) {
	end, escaped, high, ok := String(b, 0)
	if len(b) == 0 || b[0] != '"' || !ok || end != len(b) || escaped || high {
		return "", false
	}
	return string(b[1 : len(b)-1]), true
}

// Text returns the string b (one whole JSON string) holds, as
// encoding/json decodes it: escapes resolved, and each byte of invalid
// UTF-8, like each lone surrogate escape, replaced with U+FFFD.
func Text(b []byte) (string, bool) {
	end, escaped, high, ok := String(b, 0)
	if len(b) == 0 || b[0] != '"' || !ok || end != len(b) {
		return "", false
	}
	return Unquote(b[1:len(b)-1], escaped, high), true
}

// Unquote returns the value of a string String accepted, given its body
// (between the quotes) and the escaped and high String reported, as
// encoding/json decodes it. The body must be one String accepted, with
// those flags: it may panic on another (a trailing backslash, a short \u
// escape) or return it as it is.
func Unquote(body []byte, escaped, high bool) string {
	if !escaped && (!high || utf8.Valid(body)) {
		return string(body)
	}
	return unquote(body)
}

// unquote decodes the body of a string String accepted.
func unquote(body []byte) string {
	buf := make([]byte, 0, len(body)+utf8.UTFMax)
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '\\':
			switch e := body[i+1]; e {
			case 'u':
				r := hex4(body[i+2 : i+6])
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 <= len(body) && body[i] == '\\' && body[i+1] == 'u' {
						if d := utf16.DecodeRune(r, hex4(body[i+2:i+6])); d != utf8.RuneError {
							buf = utf8.AppendRune(buf, d)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				buf = utf8.AppendRune(buf, r)
				continue
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			default: // '"', '\\', '/'
				buf = append(buf, e)
			}
			i += 2
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRune(body[i:])
			buf = utf8.AppendRune(buf, r)
			i += size
		}
	}
	return string(buf)
}

// hex4 is the value of four hex digits String checked.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
