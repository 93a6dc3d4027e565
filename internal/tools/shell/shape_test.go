package shell

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTruncateText(t *testing.T) {
	emoji := "😀😀😀😀😀😀😀😀😀😀\nsecond line with text\n"
	for _, tc := range []struct {
		name string
		in   string
		p    TruncationPolicy
		want string
	}{
		// Vectors of the reference's own tests (codex-rs utils/string).
		{"tokens utf8", emoji, TruncationPolicy{TruncateTokens, 8}, "😀😀😀😀…8 tokens truncated… line with text\n"},
		{"bytes utf8", emoji, TruncationPolicy{TruncateBytes, 20}, "😀😀…21 chars truncated…with text\n"},
		{"tokens zero budget", "abcdef", TruncationPolicy{TruncateTokens, 0}, "…2 tokens truncated…"},
		{"bytes zero budget", "abcdef", TruncationPolicy{TruncateBytes, 0}, "…6 chars truncated…"},
		{"fits", "short output", TruncationPolicy{TruncateTokens, 100}, "short output"},
		{"exact fit", "abcd", TruncationPolicy{TruncateBytes, 4}, "abcd"},
		{"empty", "", TruncationPolicy{TruncateTokens, 0}, ""},
		{"bytes ascii", "hello, world", TruncationPolicy{TruncateBytes, 10}, "hello…2 chars truncated…world"},
		{"tokens ascii", strings.Repeat("a", 10) + strings.Repeat("b", 10), TruncationPolicy{TruncateTokens, 2}, "aaaa…3 tokens truncated…bbbb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, TruncateText(tc.in, tc.p))
		})
	}
}

func TestSplitString(t *testing.T) {
	for _, tc := range []struct {
		s          string
		head, tail int
		removed    int
		h, tl      string
	}{
		{"hello world", 5, 5, 1, "hello", "world"},
		{"abc", 0, 0, 3, "", ""},
		{"", 4, 4, 0, "", ""},
		{"abcdef", 3, 0, 3, "abc", ""},
		{"abcdef", 0, 3, 3, "", "def"},
		{"abcdef", 4, 4, 0, "abcd", "ef"},
		{"😀abc😀", 5, 5, 1, "😀a", "c😀"},
		{"😀😀😀😀😀", 1, 1, 5, "", ""},
		{"😀😀😀😀😀", 7, 7, 3, "😀", "😀"},
		{"😀😀😀😀😀", 8, 8, 1, "😀😀", "😀😀"},
	} {
		removed, h, tl := splitString(tc.s, tc.head, tc.tail)
		require.Equal(t, []any{tc.removed, tc.h, tc.tl}, []any{removed, h, tl}, "%q %d %d", tc.s, tc.head, tc.tail)
	}
}

func TestFormattedTruncateText(t *testing.T) {
	p := TruncationPolicy{TruncateBytes, 10}
	require.Equal(t, "0123456789", FormattedTruncateText("0123456789", p))
	in := "line1\nline2\nline3\n"
	require.Equal(t, "Warning: truncated output (original token count: 5)\nTotal output lines: 3\n\nline1…8 chars truncated…ine3\n", FormattedTruncateText(in, p))
}

func TestFormatFreeform(t *testing.T) {
	p := DefaultTruncationPolicy
	for _, tc := range []struct {
		name string
		r    ExecResult
		want string
	}{
		{"ok", ExecResult{ExitCode: 0, Aggregated: []byte("hi\n"), Duration: 12 * time.Millisecond},
			"Exit code: 0\nWall time: 0 seconds\nOutput:\nhi\n"},
		{"failed", ExecResult{ExitCode: 2, Aggregated: []byte("ls: x: No such file\n"), Duration: 1500 * time.Millisecond},
			"Exit code: 2\nWall time: 1.5 seconds\nOutput:\nls: x: No such file\n"},
		{"whole seconds", ExecResult{ExitCode: 0, Duration: 3 * time.Second},
			"Exit code: 0\nWall time: 3 seconds\nOutput:\n"},
		{"rounding", ExecResult{ExitCode: 0, Duration: 1249 * time.Millisecond},
			"Exit code: 0\nWall time: 1.2 seconds\nOutput:\n"},
		{"timeout", ExecResult{ExitCode: 124, TimedOut: true, Aggregated: []byte("partial\n"), Duration: 10003 * time.Millisecond},
			"Exit code: 124\nWall time: 10 seconds\nOutput:\ncommand timed out after 10003 milliseconds\npartial\n"},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, FormatFreeform(tc.r, p)) })
	}

	// Truncation that changes the line count adds the total.
	var b strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	got := FormatFreeform(ExecResult{Aggregated: []byte(b.String())}, TruncationPolicy{TruncateTokens, 20})
	require.Equal(t, "Exit code: 0\nWall time: 0 seconds\nTotal output lines: 100\nOutput:\n"+TruncateText(b.String(), TruncationPolicy{TruncateTokens, 20}), got)
	require.Contains(t, got, "…178 tokens truncated…")
}

func TestFormatStructured(t *testing.T) {
	p := DefaultTruncationPolicy
	for _, tc := range []struct {
		name string
		r    ExecResult
		want string
	}{
		{"ok", ExecResult{Aggregated: []byte("hi\n"), Duration: 40 * time.Millisecond},
			`{"output":"hi\n","metadata":{"exit_code":0,"duration_seconds":0.0}}`},
		{"escaping like serde_json", ExecResult{ExitCode: 1, Aggregated: []byte("a\"b\\c\t<&>\x01\x7f\u2028"), Duration: 2 * time.Second},
			"{\"output\":\"a\\\"b\\\\c\\t<&>\\u0001\x7f\u2028\",\"metadata\":{\"exit_code\":1,\"duration_seconds\":2.0}}"},
		{"timeout", ExecResult{ExitCode: 124, TimedOut: true, Duration: 1234 * time.Millisecond},
			`{"output":"command timed out after 1234 milliseconds\n","metadata":{"exit_code":124,"duration_seconds":1.2}}`},
		{"invalid utf8", ExecResult{Aggregated: []byte("a\xffb\xe2\x82c"), Duration: 0},
			`{"output":"a` + "\uFFFD" + `b` + "\uFFFD" + `c","metadata":{"exit_code":0,"duration_seconds":0.0}}`},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, FormatStructured(tc.r, p)) })
	}
}

func TestDurationFormats(t *testing.T) {
	for _, tc := range []struct {
		d           time.Duration
		display, js string
	}{
		{0, "0", "0.0"},
		{49 * time.Millisecond, "0", "0.0"},
		{50 * time.Millisecond, "0.1", "0.1"},
		{1 * time.Second, "1", "1.0"},
		{1250 * time.Millisecond, "1.3", "1.3"},
		{12340 * time.Millisecond, "12.3", "12.3"},
	} {
		require.Equal(t, tc.display, displaySeconds(tc.d), tc.d.String())
		require.Equal(t, tc.js, jsonSeconds(tc.d), tc.d.String())
	}
}

func TestUTF8Boundary(t *testing.T) {
	e := []byte("é") // c3 a9
	require.Equal(t, 1, utf8Boundary([]byte{'a', e[0]}))
	require.Equal(t, 3, utf8Boundary(append([]byte{'a'}, e...)))
	require.Equal(t, 2, utf8Boundary([]byte{'a', 'b'}))
	require.Equal(t, 1, utf8Boundary([]byte{'a', 0xf0, 0x9f, 0x98}))
	require.Equal(t, 2, utf8Boundary([]byte{'a', 0xff})) // invalid bytes are passed on, not held
}

func TestTruncationPolicyBudget(t *testing.T) {
	require.Equal(t, 40000, DefaultTruncationPolicy.ByteBudget())
	require.Equal(t, 10000, UnknownModelTruncationPolicy.ByteBudget())
	require.Equal(t, TruncationPolicy{TruncateTokens, 12000}, DefaultTruncationPolicy.Scale(1.2))
	require.Equal(t, TruncationPolicy{TruncateBytes, 13}, TruncationPolicy{TruncateBytes, 11}.Scale(1.1))
}
