package policy

import (
	"path/filepath"
	"strings"
)

// ShellScript returns the script of a `bash|zsh|sh -lc|-c <script>` argv:
// exactly three words, a shell named bash, zsh or sh (bare or as a path) and
// the flag -lc or -c.
func ShellScript(argv []string) (string, bool) {
	if len(argv) != 3 {
		return "", false
	}
	switch filepath.Base(argv[0]) {
	case "bash", "zsh", "sh":
	default:
		return "", false
	}
	if argv[1] != "-lc" && argv[1] != "-c" {
		return "", false
	}
	return argv[2], true
}

// ShellPlainCommands splits a `bash -lc <script>` argv (see ShellScript) whose
// script is a plain sequence of simple commands into those commands; ok is
// false for any other argv or script.
func ShellPlainCommands(argv []string) ([][]string, bool) {
	script, ok := ShellScript(argv)
	if !ok {
		return nil, false
	}
	return ParsePlainScript(script)
}

// shellReserved are words bash treats as syntax in command position.
var shellReserved = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true,
	"case": true, "esac": true, "for": true, "select": true, "while": true,
	"until": true, "do": true, "done": true, "function": true, "time": true,
	"coproc": true,
}

// ParsePlainScript parses a shell script made only of simple commands (bare
// words, 'single-quoted' and "double-quoted" strings without expansions,
// concatenated freely) joined by &&, ||, ; , | or newlines, and returns the
// commands' argv. It reports false for anything else: redirections, pipes
// into subshells, substitutions, variables, globs, braces, comments, escapes,
// assignments, control flow, background jobs, a quoted or concatenated
// program name, or an empty command between operators. An empty script
// yields no commands and true.
//
// This is the Go counterpart of the reference's tree-sitter based
// try_parse_word_only_commands_sequence; it is deliberately stricter where
// the two could differ, since a false result only means "not split".
func ParsePlainScript(script string) ([][]string, bool) {
	p := plainParser{src: script}
	return p.parse()
}

type plainParser struct {
	src      string
	commands [][]string
	cur      []string
	// word state
	word      strings.Builder
	inWord    bool
	parts     int  // string pieces concatenated into the current word
	quoted    bool // some piece of the current word was quoted
	pendingOp bool // an operator that needs a following command was seen
}

func (p *plainParser) parse() ([][]string, bool) {
	s := p.src
	for i := 0; i < len(s); {
		c := s[i]
		switch c {
		case ' ', '\t':
			if !p.endWord() {
				return nil, false
			}
			i++
		case '\n':
			if !p.endWord() {
				return nil, false
			}
			// A newline ends a command; after && || | bash keeps reading
			// the next line, and blank lines are fine.
			if len(p.cur) > 0 {
				p.endCommand()
			}
			i++
		case ';':
			if !p.endWord() || len(p.cur) == 0 {
				return nil, false
			}
			if i+1 < len(s) && (s[i+1] == ';' || s[i+1] == '&') {
				return nil, false
			}
			p.endCommand()
			i++
		case '&':
			if i+1 >= len(s) || s[i+1] != '&' {
				return nil, false // background job
			}
			if !p.operator() {
				return nil, false
			}
			i += 2
		case '|':
			if i+1 < len(s) && s[i+1] == '&' {
				return nil, false
			}
			if !p.operator() {
				return nil, false
			}
			if i+1 < len(s) && s[i+1] == '|' {
				i += 2
			} else {
				i++
			}
		case '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, false
			}
			p.piece(s[i+1:i+1+end], true)
			i += end + 2
		case '"':
			content, n, ok := doubleQuoted(s[i+1:])
			if !ok {
				return nil, false
			}
			p.piece(content, true)
			i += n + 2
		default:
			if !plainWordByte(c) {
				return nil, false
			}
			j := i
			for j < len(s) && plainWordByte(s[j]) {
				j++
			}
			p.piece(s[i:j], false)
			i = j
		}
	}
	if !p.endWord() || p.pendingOp && len(p.cur) == 0 {
		return nil, false
	}
	if len(p.cur) > 0 {
		p.endCommand()
	}
	return p.commands, true
}

// plainWordByte reports whether c may appear unquoted in a plain word.
// Everything with a meaning to the shell (expansion, globbing, redirection,
// grouping, comments, escapes, history) is excluded, as are control bytes.
func plainWordByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	case c >= 0x80: // UTF-8 continuation and lead bytes
		return true
	}
	return strings.IndexByte("-_./:=+,%@^~", c) >= 0
}

// doubleQuoted scans a "..." body (s starts after the opening quote) and
// returns its value with bash's escapes applied, the byte length of the body,
// and false when it has an expansion or no closing quote.
func doubleQuoted(s string) (string, int, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), i, true
		case '$', '`':
			return "", 0, false
		case '\\':
			if i+1 >= len(s) {
				return "", 0, false
			}
			switch n := s[i+1]; n {
			case '$', '`', '"', '\\':
				b.WriteByte(n)
				i++
			case '\n':
				i++ // line continuation
			default:
				b.WriteByte('\\')
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, false
}

func (p *plainParser) piece(text string, quoted bool) {
	if !p.inWord {
		p.inWord, p.parts, p.quoted = true, 0, false
		p.word.Reset()
	}
	p.word.WriteString(text)
	p.parts++
	p.quoted = p.quoted || quoted
}

// endWord finishes the current word, rejecting words the reference rejects.
func (p *plainParser) endWord() bool {
	if !p.inWord {
		return true
	}
	p.inWord = false
	w := p.word.String()
	if p.parts > 1 && w == "" {
		return false // an empty concatenation
	}
	if len(p.cur) == 0 {
		// The program name must be one bare word: no quotes, no concatenation,
		// not an assignment and not a reserved word.
		if p.quoted || p.parts != 1 || isAssignment(w) || shellReserved[w] {
			return false
		}
	}
	p.cur = append(p.cur, w)
	return true
}

func (p *plainParser) endCommand() {
	p.commands = append(p.commands, p.cur)
	p.cur = nil
	p.pendingOp = false
}

// operator handles && || | : the command before it must be non-empty.
func (p *plainParser) operator() bool {
	if !p.endWord() || len(p.cur) == 0 {
		return false
	}
	p.endCommand()
	p.pendingOp = true
	return true
}

// isAssignment reports whether w has the NAME=... or NAME+=... form bash
// reads as a variable assignment in command position.
func isAssignment(w string) bool {
	eq := strings.IndexByte(w, '=')
	if eq <= 0 {
		return false
	}
	name := strings.TrimSuffix(w[:eq], "+")
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return true
}
