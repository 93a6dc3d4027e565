package shell

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// TruncationMode says whether a truncation budget counts bytes or tokens.
type TruncationMode int

// The truncation modes (docs/tools.md §3.1).
const (
	// TruncateTokens budgets approximate tokens (4 bytes each); the marker
	// reads "…N tokens truncated…". Every model of the 0.169 catalog uses it.
	TruncateTokens TruncationMode = iota
	// TruncateBytes budgets bytes; the marker reads "…N chars truncated…".
	// Unknown models use it.
	TruncateBytes
)

// approxBytesPerToken is the reference's token estimate.
const approxBytesPerToken = 4

// TruncationPolicy is a model's truncation_policy: a mode and a limit.
type TruncationPolicy struct {
	// Mode selects bytes or tokens.
	Mode TruncationMode
	// Limit is the budget in Mode's unit.
	Limit int
}

// DefaultTruncationPolicy is the catalog models' policy: 10 000 tokens.
var DefaultTruncationPolicy = TruncationPolicy{Mode: TruncateTokens, Limit: 10000}

// UnknownModelTruncationPolicy is the fallback for models missing from the
// catalog: 10 000 bytes.
var UnknownModelTruncationPolicy = TruncationPolicy{Mode: TruncateBytes, Limit: 10000}

// ByteBudget is the policy's budget in bytes.
func (p TruncationPolicy) ByteBudget() int {
	if p.Limit <= 0 {
		return 0
	}
	if p.Mode == TruncateTokens {
		return p.Limit * approxBytesPerToken
	}
	return p.Limit
}

// Scale returns the policy with its limit multiplied by f, rounded up (the
// history budget is the policy scaled by 1.2).
func (p TruncationPolicy) Scale(f float64) TruncationPolicy {
	n := float64(p.Limit) * f
	l := int(n)
	if float64(l) < n {
		l++
	}
	return TruncationPolicy{Mode: p.Mode, Limit: l}
}

// ApproxTokenCount is the reference's token estimate: ceil(bytes / 4).
func ApproxTokenCount(s string) int {
	return (len(s) + approxBytesPerToken - 1) / approxBytesPerToken
}

// TruncateText middle-truncates s to the policy's byte budget
// (truncate_text): the first budget/2 bytes and the last budget-budget/2
// bytes are kept, both cut on UTF-8 boundaries, with the marker
// "…N tokens truncated…" (N = ceil((len - budget) / 4)) or
// "…N chars truncated…" (N = characters dropped) between them. Text that
// fits is returned unchanged; a zero budget leaves only the marker.
func TruncateText(s string, p TruncationPolicy) string {
	if s == "" {
		return ""
	}
	budget := p.ByteBudget()
	tokens := p.Mode == TruncateTokens
	if budget == 0 {
		n := utf8.RuneCountInString(s)
		if tokens {
			n = ApproxTokenCount(s)
		}
		return marker(tokens, n)
	}
	if len(s) <= budget {
		return s
	}
	left := budget / 2
	removedChars, head, tail := splitString(s, left, budget-left)
	n := removedChars
	if tokens {
		n = (len(s) - budget + approxBytesPerToken - 1) / approxBytesPerToken
	}
	return head + marker(tokens, n) + tail
}

func marker(tokens bool, n int) string {
	if tokens {
		return fmt.Sprintf("…%d tokens truncated…", n)
	}
	return fmt.Sprintf("…%d chars truncated…", n)
}

// splitString keeps whole characters: those ending within the first
// headBytes, and those starting at or after len-tailBytes. It returns how
// many characters fall in between.
func splitString(s string, headBytes, tailBytes int) (removed int, head, tail string) {
	tailStart := len(s) - tailBytes
	if tailStart < 0 {
		tailStart = 0
	}
	prefixEnd, suffixStart := 0, len(s)
	suffixStarted := false
	for i, r := range s {
		end := i + utf8.RuneLen(r)
		if r == utf8.RuneError && end > len(s) {
			end = i + 1
		}
		if end <= headBytes {
			prefixEnd = end
			continue
		}
		if i >= tailStart {
			if !suffixStarted {
				suffixStart, suffixStarted = i, true
			}
			continue
		}
		removed++
	}
	if suffixStart < prefixEnd {
		suffixStart = prefixEnd
	}
	return removed, s[:prefixEnd], s[suffixStart:]
}

// FormattedTruncateText is formatted_truncate_text, used for the structured
// shell output: text within the byte budget is unchanged; longer text gets
// the header "Warning: truncated output (original token count: T)" and
// "Total output lines: L" and a blank line before the middle-truncated text.
func FormattedTruncateText(s string, p TruncationPolicy) string {
	if len(s) <= p.ByteBudget() {
		return s
	}
	return fmt.Sprintf("Warning: truncated output (original token count: %d)\nTotal output lines: %d\n\n%s",
		ApproxTokenCount(s), countLines(s), TruncateText(s, p))
}

// countLines counts lines the way Rust's str::lines does: a final line
// terminator does not start another line.
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
