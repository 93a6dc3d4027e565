package lossy

import (
	"testing"
	"unicode/utf8"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The expected values are what Rust's String::from_utf8_lossy returns.
func TestStringMatchesRust(t *testing.T) {
	for in, want := range map[string]string{
		"plain":            "plain",
		"\xff\xfe":         "\uFFFD\uFFFD",
		"\xe2\x82":         "\uFFFD",
		"a\xe2\x82b":       "a\uFFFDb", // truncated 3-byte sequence: one replacement
		"\xf0\x9f\x98":     "\uFFFD",
		"a\xf0\x9f\x98b":   "a\uFFFDb",
		"\xed\xa0\x80":     "\uFFFD\uFFFD\uFFFD", // surrogate: ED then A0 is not a continuation
		"\xc3\xa9\xc3":     "é\uFFFD",
		"ok\xc3\xa9\x80x":  "ok\u00e9\uFFFDx",
		"\xf4\x90\x80\x80": "\uFFFD\uFFFD\uFFFD\uFFFD",
	} {
		if got := String([]byte(in)); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzString(f *testing.F) {
	for _, s := range []string{"plain", "\xff\xfe", "a\xe2\x82b", "\xed\xa0\x80", "é"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out := String(b)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out of %q", b)
		}
		if utf8.Valid(b) && out != string(b) {
			t.Fatalf("valid input changed: %q", b)
		}
	})
}
