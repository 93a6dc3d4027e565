package jsonscan

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// stringByBytes is String one byte at a time, as it was before it read
// words: the word-wise String must say the same of every input.
func stringByBytes(b []byte, i int) (end int, escaped, high, ok bool) { return stringAt(b, i, false) }

// TestStringWordWise puts each kind of byte String must stop at, or
// note, at every offset of strings longer than a word, alone and in
// pairs, and compares String with the byte-wise scan.
func TestStringWordWise(t *testing.T) {
	marks := []string{`"`, `\n`, `\u00e9`, `\x`, "\x00", "\x1f", " ", "\x7f", "é", "\xff", `\`, `\u12`, "~", "!", "#", "[", "]", "\x20"}
	check := func(s string) {
		t.Helper()
		b := []byte(s)
		gotEnd, gotEsc, gotHigh, gotOK := String(b, 0)
		end, esc, high, ok := stringByBytes(b, 0)
		require.Equal(t, []any{end, esc, high, ok}, []any{gotEnd, gotEsc, gotHigh, gotOK}, "%q", s)
	}
	for n := 0; n <= 40; n++ {
		body := strings.Repeat("abcdefgh", 6)[:n]
		check(`"` + body)
		check(`"` + body + `"`)
		for p := 0; p <= n; p++ {
			for _, m := range marks {
				check(`"` + body[:p] + m + body[p:] + `"tail`)
				check(`"` + body[:p] + m + body[p:])
				for _, m2 := range []string{`"`, "é", "\x01", `\t`} {
					check(`"` + body[:p] + m + body[p:] + m2 + body + `"`)
				}
			}
		}
	}
}

// BenchmarkString scans a string of 4 KB of ASCII text, as the
// instructions and tool descriptions of a model request are, and one of
// text past ASCII.
func BenchmarkString(b *testing.B) {
	for _, tc := range []struct{ name, unit string }{{"ascii", "The quick brown fox jumps over the lazy dog. "}, {"accented", "Füße über Straßen, déjà vu. "}} {
		s := []byte(`"` + strings.Repeat(tc.unit, 4096/len(tc.unit)) + `"`)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				if end, _, _, ok := String(s, 0); !ok || end != len(s) {
					b.Fatal(end, ok)
				}
			}
		})
		b.Run(tc.name+"/bytewise", func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				if end, _, _, ok := stringByBytes(s, 0); !ok || end != len(s) {
					b.Fatal(end, ok)
				}
			}
		})
	}
}

// FuzzString holds the word-wise String to the byte-wise scan on any
// input.
func FuzzString(f *testing.F) {
	for _, s := range []string{`"abcdefghijklmnop"`, "\"abcdefg\x80\xa0\xbf\xff\\\"x\"", "\"\x1f\x20\x7f\x21\"", `"\u00e9\\\/"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		gotEnd, gotEsc, gotHigh, gotOK := String(b, 0)
		end, esc, high, ok := stringByBytes(b, 0)
		require.Equal(t, []any{end, esc, high, ok}, []any{gotEnd, gotEsc, gotHigh, gotOK}, "%q", b)
	})
}
