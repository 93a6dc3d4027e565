package shell

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// TimeoutExitCode is the exit code reported for a command stopped by its
// timeout.
const TimeoutExitCode = 124

// signalExitBase is added to the signal number of a command killed by a
// signal.
const signalExitBase = 128

// FormatStructured renders a run in the structured form of the shell tool
// (tools.md §3.3): the JSON string
// {"output":"<formatted_truncate_text>","metadata":{"exit_code":N,"duration_seconds":S}}.
func FormatStructured(r ExecResult, p TruncationPolicy) string {
	out := FormattedTruncateText(contentWithTimeout(r), p)
	var b strings.Builder
	b.WriteString(`{"output":`)
	writeJSONString(&b, out)
	fmt.Fprintf(&b, `,"metadata":{"exit_code":%d,"duration_seconds":%s}}`, r.ExitCode, jsonSeconds(r.Duration))
	return b.String()
}

// FormatFreeform renders a run in the freeform form of shell_command
// (tools.md §3.3):
//
//	Exit code: N
//	Wall time: S seconds
//	Total output lines: L      (only when truncation changed the line count)
//	Output:
//	<truncate_text(output)>
func FormatFreeform(r ExecResult, p TruncationPolicy) string {
	content := contentWithTimeout(r)
	total := countLines(content)
	formatted := TruncateText(content, p)
	var b strings.Builder
	fmt.Fprintf(&b, "Exit code: %d\nWall time: %s seconds\n", r.ExitCode, displaySeconds(r.Duration))
	if total != countLines(formatted) {
		fmt.Fprintf(&b, "Total output lines: %d\n", total)
	}
	b.WriteString("Output:\n")
	b.WriteString(formatted)
	return b.String()
}

// contentWithTimeout is the text both formats start from: the aggregated
// output, prefixed on timeout by "command timed out after <ms> milliseconds"
// where ms is the measured duration, as the reference does.
func contentWithTimeout(r ExecResult) string {
	text := LossyString(r.Aggregated)
	if r.TimedOut {
		return fmt.Sprintf("command timed out after %d milliseconds\n%s", r.Duration.Milliseconds(), text)
	}
	return text
}

// roundedSeconds is the reference's duration: seconds as an f32, rounded to
// one decimal.
func roundedSeconds(d time.Duration) float32 {
	s := float32(d.Seconds())
	return float32(math.Round(float64(s*10))) / 10
}

// displaySeconds formats like Rust's Display for f32: shortest form, no
// trailing ".0" ("0", "1.5", "12").
func displaySeconds(d time.Duration) string {
	return strconv.FormatFloat(float64(roundedSeconds(d)), 'f', -1, 32)
}

// jsonSeconds formats like serde_json for f32: shortest form, integral
// values keep ".0" ("0.0", "1.5", "12.0").
func jsonSeconds(d time.Duration) string {
	s := displaySeconds(d)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// LossyString converts command output to text the way Rust's
// String::from_utf8_lossy does: each maximal invalid subsequence becomes one
// U+FFFD.
func LossyString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r != utf8.RuneError || n > 1 {
			sb.Write(b[:n])
			b = b[n:]
			continue
		}
		sb.WriteRune(utf8.RuneError)
		b = b[maximalSubpart(b):]
	}
	return sb.String()
}

// maximalSubpart is the length of the invalid sequence at the start of b
// that Unicode's "maximal subpart" rule replaces by one U+FFFD: a valid lead
// byte followed by as many valid continuation bytes as an incomplete
// sequence has, or a single byte.
func maximalSubpart(b []byte) int {
	lo, hi := byte(0x80), byte(0xBF)
	need := 0
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}

// writeJSONString writes s as a JSON string escaped the way serde_json does
// (only quote, backslash and control characters; <, >, & and U+2028 stay
// as they are), so the structured output is byte-identical to the
// reference's.
func writeJSONString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		var esc string
		switch {
		case c == '"':
			esc = `\"`
		case c == '\\':
			esc = `\\`
		case c == '\b':
			esc = `\b`
		case c == '\t':
			esc = `\t`
		case c == '\n':
			esc = `\n`
		case c == '\f':
			esc = `\f`
		case c == '\r':
			esc = `\r`
		case c < 0x20:
			esc = `\u00` + string(hex[c>>4]) + string(hex[c&0xf])
		default:
			continue
		}
		b.WriteString(s[start:i])
		b.WriteString(esc)
		start = i + 1
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}
