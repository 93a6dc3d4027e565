package execsession

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// bytesPerToken is the token estimate of docs/tools.md §3.1: a token is about
// four bytes.
const bytesPerToken = 4

// ApproxTokenCount estimates the tokens of s as ceil(bytes / 4).
func ApproxTokenCount(s string) int {
	return (len(s) + bytesPerToken - 1) / bytesPerToken
}

// TruncateMiddle cuts s to a budget of maxTokens tokens (4·maxTokens bytes):
// it keeps half the byte budget from the start and the rest from the end,
// both cut on UTF-8 boundaries, and puts "…<N> tokens truncated…" between
// them, N being ceil((len(s) - budget) / 4). A zero budget leaves only the
// marker, counting every token of s. Text within budget is returned as is.
func TruncateMiddle(s string, maxTokens int) string {
	if s == "" {
		return ""
	}
	maxBytes := max(maxTokens, 0) * bytesPerToken
	if maxTokens > 0 && len(s) <= maxBytes {
		return s
	}
	if maxBytes == 0 {
		return fmt.Sprintf("…%d tokens truncated…", ApproxTokenCount(s))
	}
	left := maxBytes / 2
	right := maxBytes - left
	prefixEnd := floorRuneBoundary(s, left)
	suffixStart := max(ceilRuneBoundary(s, len(s)-right), prefixEnd)
	removed := (len(s) - maxBytes + bytesPerToken - 1) / bytesPerToken
	return s[:prefixEnd] + fmt.Sprintf("…%d tokens truncated…", removed) + s[suffixStart:]
}

// FormattedTruncate is TruncateMiddle with the reference header when the
// text does not fit: "Warning: truncated output (original token count:
// <T>)", "Total output lines: <L>" and a blank line before the cut text.
func FormattedTruncate(s string, maxTokens int) string {
	return formattedTruncate(s, maxTokens, ApproxTokenCount(s))
}

// formattedTruncate is FormattedTruncate with the original token count
// given (it differs from s's when s lost bytes before, e.g. in the session
// buffer).
func formattedTruncate(s string, maxTokens, originalTokens int) string {
	if len(s) <= max(maxTokens, 0)*bytesPerToken {
		return s
	}
	return fmt.Sprintf("Warning: truncated output (original token count: %d)\nTotal output lines: %d\n\n%s",
		originalTokens, countLines(s), TruncateMiddle(s, maxTokens))
}

// countLines counts lines the way Rust's str::lines does: a trailing newline
// does not start another line.
func countLines(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

func floorRuneBoundary(s string, i int) int {
	i = min(max(i, 0), len(s))
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

func ceilRuneBoundary(s string, i int) int {
	i = min(max(i, 0), len(s))
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// headTail is a byte buffer capped at max bytes that keeps the first half
// and the last half of what was written, counting the bytes dropped from the
// middle. It is not safe for concurrent use.
type headTail struct {
	max     int
	head    []byte
	tail    []byte
	omitted int
}

func newHeadTail(max int) headTail { return headTail{max: max} }

// write appends p.
func (h *headTail) write(p []byte) {
	if len(p) == 0 {
		return
	}
	headBudget := h.max / 2
	tailBudget := h.max - headBudget
	if room := headBudget - len(h.head); room > 0 {
		n := min(room, len(p))
		h.head = append(h.head, p[:n]...)
		p = p[n:]
	}
	if len(p) == 0 {
		return
	}
	if tailBudget == 0 {
		h.omitted += len(p)
		return
	}
	if len(p) >= tailBudget {
		h.omitted += len(h.tail) + len(p) - tailBudget
		h.tail = append(h.tail[:0], p[len(p)-tailBudget:]...)
		return
	}
	h.tail = append(h.tail, p...)
	if excess := len(h.tail) - tailBudget; excess > 0 {
		h.omitted += excess
		h.tail = append(h.tail[:0], h.tail[excess:]...)
	}
}

// empty reports whether nothing is buffered.
func (h *headTail) empty() bool { return len(h.head) == 0 && len(h.tail) == 0 && h.omitted == 0 }

// bytes returns head, the "... <N> bytes omitted ..." marker when bytes were
// dropped, and tail.
func (h *headTail) bytes() []byte {
	out := make([]byte, 0, len(h.head)+len(h.tail)+40)
	out = append(out, h.head...)
	if h.omitted > 0 {
		out = fmt.Appendf(out, "\n... %d bytes omitted ...\n", h.omitted)
	}
	return append(out, h.tail...)
}

// drainCounted returns the buffered bytes without a marker, the number of
// bytes dropped from their middle, and empties the buffer.
func (h *headTail) drainCounted() (head, tail []byte, omitted int) {
	head, tail, omitted = h.head, h.tail, h.omitted
	h.head, h.tail, h.omitted = nil, nil, 0
	return head, tail, omitted
}

// drain returns bytes() and empties the buffer.
func (h *headTail) drain() []byte {
	if h.empty() {
		return nil
	}
	out := h.bytes()
	h.head, h.tail, h.omitted = nil, nil, 0
	return out
}
