package skills

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/registry"
)

// ErrPackageUnavailable is returned (wrapped) by Provider.Lookup when the
// package is not in the provider's live catalog, or is disabled.
var ErrPackageUnavailable = errors.New("skill package is not available from the requested authority")

// maxErrorBytes bounds every error text the tools answer the model with, so
// failures stay far below the 8 KB result cap whatever the model sent.
const maxErrorBytes = 1024

// modelError returns a respond-to-model error: an *apperr.Error whose
// message (the text the model reads) is cut to maxErrorBytes.
func modelError(code apperr.Code, format string, args ...any) error {
	return &apperr.Error{Code: code, Message: truncateForMessage(fmt.Sprintf(format, args...), maxErrorBytes)}
}

// boundError turns any handler error into a model-facing error whose text
// is at most maxErrorBytes, keeping *apperr.Error messages and fatal errors
// as they are.
func boundError(err error) error {
	if err == nil || errors.Is(err, registry.ErrFatal) {
		return err
	}
	var ae *apperr.Error
	if errors.As(err, &ae) && ae == err {
		if len(ae.Message) <= maxErrorBytes {
			return err
		}
		return &apperr.Error{Code: ae.Code, Message: truncateForMessage(ae.Message, maxErrorBytes), Err: ae.Err}
	}
	msg := err.Error()
	if len(msg) <= maxErrorBytes {
		return err
	}
	return &apperr.Error{Code: apperr.CodeOf(err), Message: truncateForMessage(msg, maxErrorBytes), Err: err}
}

// truncateForMessage cuts s to at most n bytes on a rune boundary, marking
// a cut with "...".
func truncateForMessage(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut, _ := truncateUTF8(s, n-3)
	return cut + "..."
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune, and
// reports whether it cut.
func truncateUTF8(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	if n <= 0 {
		return "", true
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}

// oneLine collapses every run of whitespace and control characters into one
// space and trims the ends, so a label cannot break the line or the layout
// of what embeds it.
func oneLine(s string) string {
	if isOneLine(s) {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	b.Grow(len(s))
	pending := false
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			pending = b.Len() > 0
			continue
		}
		if pending {
			b.WriteByte(' ')
			pending = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isOneLine reports whether oneLine would return s unchanged, checking
// the common case (printable ASCII, single inner spaces) without
// allocating.
func isOneLine(s string) bool {
	if s == "" {
		return true
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || (c == ' ' && s[i+1] == ' ') {
			return false
		}
	}
	return true
}

// validHandle reports whether a handle is non-empty, at most maxBytes long
// and free of control characters (the reference's bounded-handle rule).
func validHandle(s string, maxBytes int) bool {
	if s == "" || len(s) > maxBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// handleError is the reference text for a handle failing validHandle.
func handleError(field string, maxBytes int) error {
	return modelError(apperr.Invalid, "%s must be non-empty, contain no control characters, and be at most %d bytes", field, maxBytes)
}
