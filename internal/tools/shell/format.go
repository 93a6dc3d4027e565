package shell

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/appserver/appserver/internal/lossy"
)

// TimeoutExitCode is the exit code reported for a command stopped by its
// timeout.
const TimeoutExitCode = 124

// signalExitBase is added to the signal number of a command killed by a
// signal.
const signalExitBase = 128

// FormatStructured renders a run in the structured form of the shell tool
// (docs/tools.md §3.3): the JSON string
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
// (docs/tools.md §3.3):
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
	text := lossy.String(r.Aggregated)
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
