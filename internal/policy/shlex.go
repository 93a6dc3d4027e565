package policy

import "strings"

// ShellJoin renders argv as one shell-quoted line the way the reference's
// shlex::try_join does; rejection reasons quote commands with it. Each word
// is split into chunks that are left bare, 'single-quoted' or
// "double-quoted", whichever the chunk's bytes allow, in that order of
// preference; an empty word becomes two single quotes.
func ShellJoin(argv []string) string {
	parts := make([]string, len(argv))
	for i, w := range argv {
		parts[i] = shellQuote(w)
	}
	return strings.Join(parts, " ")
}

const (
	quoteBare   = 1
	quoteSingle = 2
	quoteDouble = 4
)

func bareOK(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("+-./:@]_", c) >= 0
}

func shellQuote(w string) string {
	if w == "" {
		return "''"
	}
	var out strings.Builder
	rest := w
	for rest != "" {
		n, strategy := quoteStrategy(rest)
		if n == len(rest) && strategy == quoteBare && out.Len() == 0 {
			return w
		}
		chunk := rest[:n]
		switch strategy {
		case quoteBare:
			out.WriteString(chunk)
		case quoteSingle:
			out.WriteByte('\'')
			out.WriteString(chunk)
			out.WriteByte('\'')
		default:
			out.WriteByte('"')
			for i := 0; i < len(chunk); i++ {
				if c := chunk[i]; c == '$' || c == '`' || c == '"' || c == '\\' {
					out.WriteByte('\\')
				}
				out.WriteByte(chunk[i])
			}
			out.WriteByte('"')
		}
		rest = rest[n:]
	}
	return out.String()
}

// quoteStrategy picks the best quoting for the longest prefix of s that one
// strategy can cover (s is non-empty).
func quoteStrategy(s string) (int, int) {
	prev := quoteBare | quoteSingle | quoteDouble
	i := 0
	if s[0] == '^' {
		prev = quoteSingle
		i = 1
	}
	for ; i < len(s); i++ {
		c := s[i]
		cur := prev
		if c >= 0x80 {
			cur &^= quoteBare
		} else {
			if !bareOK(c) {
				cur &^= quoteBare
			}
			if c == '\'' || c == '^' || c == '\\' {
				cur &^= quoteSingle
			}
			if c == '`' || c == '$' || c == '!' || c == '^' {
				cur &^= quoteDouble
			}
		}
		if cur == 0 {
			break
		}
		prev = cur
	}
	switch {
	case prev&quoteBare != 0:
		return i, quoteBare
	case prev&quoteSingle != 0:
		return i, quoteSingle
	default:
		return i, quoteDouble
	}
}

// ShellSplit splits a command line into words with POSIX shell quoting, as
// the reference's shlex::split does for rule examples: blanks separate words,
// '...' is literal, "..." honours \$ \` \" \\ and line continuations, a
// backslash outside quotes escapes the next byte, and # at the start of a
// word comments out the rest of the line. It reports false on an unterminated
// quote or a trailing backslash.
func ShellSplit(s string) ([]string, bool) {
	var words []string
	var w strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		case c == '#' && !in:
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '\\':
			if i+1 >= len(s) {
				return nil, false
			}
			i++
			if s[i] != '\n' {
				w.WriteByte(s[i])
				in = true
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, false
			}
			w.WriteString(s[i+1 : i+1+end])
			i += end + 1
			in = true
		case c == '"':
			i++
			closed := false
			for ; i < len(s); i++ {
				d := s[i]
				if d == '"' {
					closed = true
					break
				}
				if d == '\\' && i+1 < len(s) {
					switch n := s[i+1]; n {
					case '$', '`', '"', '\\':
						w.WriteByte(n)
						i++
						continue
					case '\n':
						i++
						continue
					}
				}
				w.WriteByte(d)
			}
			if !closed {
				return nil, false
			}
			in = true
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words, true
}
