package turns

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSnippetAround(t *testing.T) {
	pad := strings.Repeat("é", 50) // two bytes a rune: cuts must not split one
	for _, tc := range []struct {
		name, text, term, want string
	}{
		{"short text whole", "fix the login", "LOGIN", "fix the login"},
		{"cut both sides", pad + " needle " + pad, "needle", "…" + strings.Repeat("é", 30) + " needle " + strings.Repeat("é", 30) + "…"},
		{"no match keeps the start", pad + pad, "zzz", strings.Repeat("é", 32) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := snippetAround(tc.text, tc.term)
			if !utf8.ValidString(got) {
				t.Fatalf("invalid UTF-8: %q", got)
			}
			if got != tc.want {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}
