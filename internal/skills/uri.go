package skills

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// URIScheme is the only scheme a skill package or resource handle may use.
const URIScheme = "skill"

// Length limits of skill handles, in bytes (docs/tools.md §6.1).
const (
	// MaxPackageURIBytes bounds a package URI.
	MaxPackageURIBytes = 1024
	// MaxResourceURIBytes bounds a resource URI.
	MaxResourceURIBytes = 2048
)

// URIError explains why a string is not an acceptable skill URI. Its text is
// written for the model, which can correct the call and retry.
type URIError struct {
	// Field is the argument that was rejected: "package" or "resource".
	Field string
	// Reason says what is wrong, e.g. "query strings are not allowed".
	Reason string
}

// Error returns "<field> is not a valid skill URI: <reason>".
func (e *URIError) Error() string {
	return e.Field + " is not a valid skill URI: " + e.Reason
}

// URI is a validated, canonical skill:// URI: skill://<host>/<seg>/<seg>...
// Segments are kept exactly as written (percent-escapes included), so the
// URI's String is byte-for-byte the validated input.
type URI struct {
	// Host is the provider-chosen host, e.g. "plugin_demo" or "local".
	Host string
	// Segments are the path segments, at least one, none empty.
	Segments []string
}

// String returns the canonical text of u.
func (u URI) String() string {
	return URIScheme + "://" + u.Host + "/" + strings.Join(u.Segments, "/")
}

// Contains reports whether r lies strictly inside the package u: same host,
// more segments, and u's segments as a prefix. A package does not contain
// itself.
func (u URI) Contains(r URI) bool {
	if u.Host != r.Host || len(r.Segments) <= len(u.Segments) {
		return false
	}
	for i, s := range u.Segments {
		if r.Segments[i] != s {
			return false
		}
	}
	return true
}

// ParsePackageURI validates a package handle (at most MaxPackageURIBytes).
func ParsePackageURI(s string) (URI, error) { return parseURI("package", s, MaxPackageURIBytes) }

// ParseResourceURI validates a resource handle (at most MaxResourceURIBytes).
func ParseResourceURI(s string) (URI, error) { return parseURI("resource", s, MaxResourceURIBytes) }

// ValidateResourceInPackage validates both handles and checks that the
// resource lies inside the package. Every rejection is a *URIError naming
// the cause: non-canonical forms, query strings, fragments, dot segments,
// encoded separators or dots, absolute paths, or a resource from another
// package.
func ValidateResourceInPackage(pkg, resource string) (URI, URI, error) {
	p, err := ParsePackageURI(pkg)
	if err != nil {
		return URI{}, URI{}, err
	}
	r, err := ParseResourceURI(resource)
	if err != nil {
		return URI{}, URI{}, err
	}
	switch {
	case r.String() == p.String():
		return URI{}, URI{}, &URIError{"resource", "it names the package itself; read the package's main_resource or a file inside the package"}
	case !p.Contains(r):
		return URI{}, URI{}, &URIError{"resource", "it is not inside the requested package (cross-package resources are rejected)"}
	}
	return p, r, nil
}

// parseURI implements the canonical skill URI grammar. It is deliberately
// stricter than a URL parser: anything a parser would normalize (case of the
// scheme or of percent-escapes, dot segments, escaped dots or separators,
// raw non-ASCII) is rejected rather than normalized, so a handle names
// exactly one resource and can never be traversal-shaped.
func parseURI(field, s string, maxBytes int) (URI, error) {
	bad := func(format string, args ...any) (URI, error) {
		return URI{}, &URIError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if s == "" {
		return bad("it is empty")
	}
	if len(s) > maxBytes {
		return bad("it is longer than %d bytes", maxBytes)
	}
	if !utf8.ValidString(s) {
		return bad("it is not valid UTF-8")
	}
	for _, r := range s {
		switch {
		case unicode.IsControl(r):
			return bad("it contains control characters")
		case unicode.IsSpace(r):
			return bad("it contains whitespace")
		case r == '<' || r == '>':
			return bad("it contains '<' or '>'")
		}
	}
	if isAbsolutePath(s) {
		return bad("absolute filesystem paths are not accepted; pass a skill:// handle returned by skills.list")
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || strings.ContainsAny(scheme, "/?#") {
		return bad("it must start with skill:// (relative paths are not accepted)")
	}
	if scheme != URIScheme {
		if strings.EqualFold(scheme, URIScheme) {
			return bad("the scheme must be lowercase skill:// (non-canonical)")
		}
		return bad("unsupported scheme %q; only skill:// is accepted", truncateForMessage(scheme, 32))
	}
	if strings.Contains(rest, "?") {
		return bad("query strings are not allowed")
	}
	if strings.Contains(rest, "#") {
		return bad("fragments are not allowed")
	}
	host, path, hasPath := strings.Cut(rest, "/")
	if err := checkHost(host); err != "" {
		return bad("%s", err)
	}
	if !hasPath || path == "" {
		return bad("it needs at least one path segment after the host")
	}
	segs := strings.Split(path, "/")
	for _, seg := range segs {
		if err := checkSegment(seg); err != "" {
			return bad("%s", err)
		}
	}
	return URI{Host: host, Segments: segs}, nil
}

// isAbsolutePath reports filesystem-path shapes: /x, \x, ~/x, C:\x, C:/x.
func isAbsolutePath(s string) bool {
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, `\`) || strings.HasPrefix(s, "~/") {
		return true
	}
	return len(s) >= 3 && isASCIILetter(s[0]) && s[1] == ':' && (s[2] == '\\' || s[2] == '/')
}

func isASCIILetter(b byte) bool { return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') }

func checkHost(host string) string {
	switch {
	case host == "":
		return "the host is empty"
	case strings.Contains(host, "@"):
		return "user information (user@) is not allowed"
	case strings.Contains(host, ":"):
		return "a port is not allowed"
	case strings.Contains(host, `\`):
		return "backslashes are not allowed"
	case strings.Contains(host, "%"):
		return "percent-encoding is not allowed in the host"
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !(isASCIILetter(c) || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.') {
			return fmt.Sprintf("the host contains %q; hosts use letters, digits, '-', '_' and '.'", rune(c))
		}
	}
	return ""
}

// segmentRaw reports the bytes a canonical segment carries unescaped: RFC
// 3986 pchar without percent-encoding. Everything else must be written as an
// uppercase %XX escape.
func segmentRaw(c byte) bool {
	switch {
	case isASCIILetter(c), c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@", c) >= 0
}

func checkSegment(seg string) string {
	switch seg {
	case "":
		return "empty path segments (// or a trailing /) are not allowed"
	case ".", "..":
		return "dot segments (. and ..) are not allowed"
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c == '%':
			if i+2 >= len(seg) {
				return "a '%' must start a two-digit uppercase escape like %20"
			}
			h, l := seg[i+1], seg[i+2]
			if !isHex(h) || !isHex(l) {
				return "a '%' must start a two-digit uppercase escape like %20"
			}
			v := unhex(h)<<4 | unhex(l)
			switch {
			case v == '.' || v == '/' || v == '\\':
				return "encoded dots or path separators (%2e, %2f, %5c) are not allowed"
			case v < 0x20 || v == 0x7f:
				return "encoded control characters are not allowed"
			case segmentRaw(v):
				return fmt.Sprintf("%%%c%c encodes %q, which must be written unescaped (non-canonical)", h, l, rune(v))
			case isLowerHex(h) || isLowerHex(l):
				return "percent-escapes must use uppercase hex digits (non-canonical)"
			}
			i += 2
		case c == '\\':
			return "backslashes are not allowed"
		case c >= 0x80:
			return "non-ASCII characters must be percent-encoded (non-canonical)"
		case !segmentRaw(c):
			return fmt.Sprintf("the character %q must be percent-encoded (non-canonical)", rune(c))
		}
	}
	return ""
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isLowerHex(c byte) bool { return c >= 'a' && c <= 'f' }

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// EscapeSegment encodes arbitrary bytes (e.g. a directory name) as one
// canonical path segment: bytes a segment may carry raw stay, everything
// else becomes an uppercase %XX escape. The result of a non-empty name other
// than "." and ".." passes validation unless the name holds '/' or '\',
// which no segment can carry.
func EscapeSegment(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if segmentRaw(c) {
			b.WriteByte(c)
			continue
		}
		const digits = "0123456789ABCDEF"
		b.WriteByte('%')
		b.WriteByte(digits[c>>4])
		b.WriteByte(digits[c&0xf])
	}
	return b.String()
}

// UnescapeSegment decodes a segment that passed validation back to the
// bytes it names. It reports false for escapes that are not well formed.
func UnescapeSegment(seg string) (string, bool) {
	if !strings.Contains(seg, "%") {
		return seg, true
	}
	var b strings.Builder
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(seg) || !isHex(seg[i+1]) || !isHex(seg[i+2]) {
			return "", false
		}
		b.WriteByte(unhex(seg[i+1])<<4 | unhex(seg[i+2]))
		i += 2
	}
	return b.String(), true
}
