package execsession

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// seq returns the output of `seq 1 n`.
func seq(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

// TestFormattedTruncateMatchesCodex pins the text codex-cli 0.169 returned
// for `seq 1 30000` with max_output_tokens 50 (captured from the binary).
func TestFormattedTruncateMatchesCodex(t *testing.T) {
	in := seq(30000)
	got := FormattedTruncate(in, 50)
	head := seq(36) + "3"
	var tail strings.Builder
	tail.WriteString("984\n")
	for i := 29985; i <= 30000; i++ {
		fmt.Fprintf(&tail, "%d\n", i)
	}
	want := "Warning: truncated output (original token count: 42224)\nTotal output lines: 30000\n\n" +
		head + "…42174 tokens truncated…" + tail.String()
	if got != want {
		t.Fatalf("got:\n%q\nwant:\n%q", got, want)
	}
	if ApproxTokenCount(in) != 42224 {
		t.Fatalf("token count %d", ApproxTokenCount(in))
	}
}

func TestTruncateEdges(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		tokens int
		want   string
	}{
		{"fits", "hello", 2, "hello"},
		{"empty", "", 0, ""},
		// codex-cli 0.169 with max_output_tokens 0 on "hello world this is long\n".
		{"zero budget", "hello world this is long\n", 0, "Warning: truncated output (original token count: 7)\nTotal output lines: 1\n\n…7 tokens truncated…"},
		{"utf8 boundary", strings.Repeat("é", 10), 2, "Warning: truncated output (original token count: 5)\nTotal output lines: 1\n\néé…3 tokens truncated…éé"},
		{"no trailing newline lines", "a\nb\nc", 1, "Warning: truncated output (original token count: 2)\nTotal output lines: 3\n\na\n…1 tokens truncated…\nc"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := FormattedTruncate(c.in, c.tokens); got != c.want {
				t.Fatalf("got %q want %q", got, c.want)
			}
		})
	}
}

func TestHeadTailKeepsBothEnds(t *testing.T) {
	h := newHeadTail(10)
	h.write([]byte("0123"))
	h.write([]byte("456789abcdef"))
	h.write([]byte("XY"))
	got := string(h.drain())
	want := "01234\n... 8 bytes omitted ...\ndefXY"
	if got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	if !h.empty() || h.drain() != nil {
		t.Fatal("drain must empty the buffer")
	}
	h.write([]byte("short"))
	if got := string(h.drain()); got != "short" {
		t.Fatalf("got %q", got)
	}
}

func TestYieldAndTokenClamps(t *testing.T) {
	ms := func(v int64) *int64 { return &v }
	if got := ExecYieldTime(nil); got != DefaultExecYieldTime {
		t.Errorf("default exec yield %v", got)
	}
	if got := ExecYieldTime(ms(10)); got != MinYieldTime {
		t.Errorf("exec yield min %v", got)
	}
	if got := ExecYieldTime(ms(120_000)); got != MaxYieldTime {
		t.Errorf("exec yield max %v", got)
	}
	if got := WriteYieldTime(nil, false); got != DefaultWriteYieldTime {
		t.Errorf("write default %v", got)
	}
	if got := WriteYieldTime(nil, true); got != MinEmptyPollYieldTime {
		t.Errorf("poll default %v", got)
	}
	if got := WriteYieldTime(ms(100), true); got != MinEmptyPollYieldTime {
		t.Errorf("poll min %v", got)
	}
	if got := WriteYieldTime(ms(60_000), false); got != MaxYieldTime {
		t.Errorf("write max %v", got)
	}
	if got := WriteYieldTime(ms(200_000), true); got != 200*time.Second {
		t.Errorf("poll large %v", got)
	}
	if got := WriteYieldTime(ms(900_000), true); got != MaxEmptyPollYieldTime {
		t.Errorf("poll max %v", got)
	}
	if got := ResolveMaxOutputTokens(nil, 0); got != DefaultMaxOutputTokens {
		t.Errorf("tokens default %d", got)
	}
	if got := ResolveMaxOutputTokens(ms(1_000_000), 0); got != MaxOutputTokensCeiling {
		t.Errorf("tokens ceiling %d", got)
	}
	if got := ResolveMaxOutputTokens(ms(300_000), 10_000); got != 10_000 {
		t.Errorf("tokens policy cap %d", got)
	}
	if got := ResolveMaxOutputTokens(ms(-5), 0); got != OutputTokensNone {
		t.Errorf("negative tokens %d", got)
	}
	if got := ResolveMaxOutputTokens(ms(0), 10_000); got != OutputTokensNone {
		t.Errorf("zero tokens %d", got)
	}
}
