package skills

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of the SKILL.md front matter fields (tools.md §6.2), in characters.
const (
	maxNameChars             = 64
	maxDescriptionChars      = 1024
	maxShortDescriptionChars = 500
)

// SkillMeta is what a SKILL.md front matter declares.
type SkillMeta struct {
	// Name is the skill name, collapsed to one line.
	Name string
	// Description is the skill description, collapsed to one line.
	Description string
	// ShortDescription is metadata.short-description (or an alias), "" when
	// absent.
	ShortDescription string
}

// ParseSkillFile extracts and validates the front matter of a SKILL.md: a
// YAML block between "---" lines at the very start. It understands the
// block-mapping subset of YAML skill files use (plain, quoted and block
// scalars, nested mappings, sequences, comments). The errors are the
// reference's classes: missing front matter, invalid YAML, missing field,
// too long.
func ParseSkillFile(data []byte) (SkillMeta, error) {
	fm, err := extractFrontMatter(data)
	if err != nil {
		return SkillMeta{}, err
	}
	doc, err := parseYAML(fm)
	if err != nil {
		return SkillMeta{}, err
	}
	var m SkillMeta
	if m.Name, err = requiredField(doc, "name", maxNameChars); err != nil {
		return SkillMeta{}, err
	}
	if m.Description, err = requiredField(doc, "description", maxDescriptionChars); err != nil {
		return SkillMeta{}, err
	}
	if meta, ok := doc["metadata"].(map[string]any); ok {
		for _, key := range []string{"short-description", "shortDescription", "short_description"} {
			v, present := meta[key]
			if !present || v == nil {
				continue
			}
			s, ok := v.(string)
			if !ok {
				return SkillMeta{}, fmt.Errorf("invalid metadata.%s: expected a string", key)
			}
			s = oneLine(s)
			if n := utf8.RuneCountInString(s); n > maxShortDescriptionChars {
				return SkillMeta{}, fmt.Errorf("invalid metadata.%s: exceeds maximum length of %d characters", key, maxShortDescriptionChars)
			}
			m.ShortDescription = s
			break
		}
	}
	return m, nil
}

func requiredField(doc map[string]any, key string, maxChars int) (string, error) {
	v, ok := doc[key]
	if !ok || v == nil {
		return "", fmt.Errorf("missing field `%s`", key)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("invalid %s: expected a string", key)
	}
	s = oneLine(s)
	if s == "" {
		return "", fmt.Errorf("missing field `%s`", key)
	}
	if utf8.RuneCountInString(s) > maxChars {
		return "", fmt.Errorf("invalid %s: exceeds maximum length of %d characters", key, maxChars)
	}
	return s, nil
}

// errNoFrontMatter is the reference's "missing YAML frontmatter" class.
var errNoFrontMatter = errors.New("missing YAML frontmatter delimited by ---")

// extractFrontMatter returns the lines between the opening and closing
// "---" delimiters.
func extractFrontMatter(data []byte) ([]string, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	text := string(data)
	first, rest, found := strings.Cut(text, "\n")
	if strings.TrimRight(first, " \t\r") != "---" || !found {
		return nil, errNoFrontMatter
	}
	var lines []string
	for rest != "" {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimRight(line, " \t") == "---" {
			return lines, nil
		}
		lines = append(lines, line)
	}
	return nil, errNoFrontMatter
}

// yamlError is an "invalid YAML" failure at a front matter line (1-based,
// counting from the line after the opening ---).
type yamlError struct {
	line int
	msg  string
}

// Error returns "invalid YAML: line <n>: <message>".
func (e *yamlError) Error() string {
	return fmt.Sprintf("invalid YAML: line %d: %s", e.line, e.msg)
}

// yline is one front matter line: its indentation and the text after it.
type yline struct {
	num    int
	indent int
	text   string // without indentation and trailing spaces
	raw    string // the whole line, for block scalars
	blank  bool   // empty or a comment
}

type yamlParser struct {
	lines []yline
	pos   int
}

// parseYAML parses the block-mapping document of a front matter.
func parseYAML(raw []string) (map[string]any, error) {
	p := &yamlParser{}
	for i, r := range raw {
		if !utf8.ValidString(r) {
			return nil, &yamlError{i + 1, "invalid UTF-8"}
		}
		body := strings.TrimLeft(r, " ")
		indent := len(r) - len(body)
		if strings.HasPrefix(body, "\t") {
			if strings.TrimSpace(body) != "" {
				return nil, &yamlError{i + 1, "tabs are not allowed in indentation"}
			}
		}
		text := strings.TrimRight(body, " \t")
		blank := text == "" || strings.HasPrefix(text, "#")
		p.lines = append(p.lines, yline{num: i + 1, indent: indent, text: text, raw: r, blank: blank})
	}
	p.skipBlank()
	if p.pos >= len(p.lines) {
		return map[string]any{}, nil
	}
	first := p.lines[p.pos]
	if first.indent != 0 {
		return nil, &yamlError{first.num, "the document must start at column 0"}
	}
	if strings.HasPrefix(first.text, "- ") || first.text == "-" {
		return nil, &yamlError{first.num, "front matter must be a mapping, not a sequence"}
	}
	m, err := p.mapping(0)
	if err != nil {
		return nil, err
	}
	p.skipBlank()
	if p.pos < len(p.lines) {
		return nil, &yamlError{p.lines[p.pos].num, "unexpected indentation"}
	}
	return m, nil
}

func (p *yamlParser) skipBlank() {
	for p.pos < len(p.lines) && p.lines[p.pos].blank {
		p.pos++
	}
}

// next returns the next non-blank line without consuming it.
func (p *yamlParser) next() (yline, bool) {
	p.skipBlank()
	if p.pos >= len(p.lines) {
		return yline{}, false
	}
	return p.lines[p.pos], true
}

func isSeqItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

// mapping parses "key: value" lines at exactly indent.
func (p *yamlParser) mapping(indent int) (map[string]any, error) {
	m := map[string]any{}
	for {
		l, ok := p.next()
		if !ok || l.indent < indent {
			return m, nil
		}
		if l.indent > indent {
			return nil, &yamlError{l.num, "unexpected indentation"}
		}
		if isSeqItem(l.text) {
			return nil, &yamlError{l.num, "a sequence item where a mapping key was expected"}
		}
		key, rest, err := splitKey(l)
		if err != nil {
			return nil, err
		}
		if _, dup := m[key]; dup {
			return nil, &yamlError{l.num, fmt.Sprintf("duplicate key %q", key)}
		}
		p.pos++
		v, err := p.value(l, indent, rest)
		if err != nil {
			return nil, err
		}
		m[key] = v
	}
}

// splitKey splits "key: rest" (the key plain or quoted).
func splitKey(l yline) (string, string, error) {
	t := l.text
	if t[0] == '"' || t[0] == '\'' {
		s, n, err := quoted(t, l.num)
		if err != nil {
			return "", "", err
		}
		after := t[n:]
		if after != ":" && !strings.HasPrefix(after, ": ") && !strings.HasPrefix(after, ":\t") {
			return "", "", &yamlError{l.num, "expected ':' after the key"}
		}
		return s, strings.TrimSpace(after[1:]), nil
	}
	idx := -1
	for i := 0; i < len(t); i++ {
		if t[i] == ':' && (i+1 == len(t) || t[i+1] == ' ' || t[i+1] == '\t') {
			idx = i
			break
		}
		if t[i] == '#' && i > 0 && (t[i-1] == ' ' || t[i-1] == '\t') {
			break
		}
	}
	if idx <= 0 {
		return "", "", &yamlError{l.num, "expected a 'key: value' mapping entry"}
	}
	key := strings.TrimRight(t[:idx], " \t")
	if strings.ContainsAny(key[:1], "[]{},&*!|>%@`") {
		return "", "", &yamlError{l.num, fmt.Sprintf("unsupported key %q", key)}
	}
	return key, strings.TrimSpace(t[idx+1:]), nil
}

// value parses what follows "key:" on line l (whose mapping is at indent).
func (p *yamlParser) value(l yline, indent int, rest string) (any, error) {
	switch {
	case rest == "" || strings.HasPrefix(rest, "#"):
		n, ok := p.next()
		if !ok {
			return nil, nil
		}
		switch {
		case n.indent > indent && isSeqItem(n.text):
			return p.sequence(n.indent)
		case n.indent > indent:
			return p.mapping(n.indent)
		case n.indent == indent && isSeqItem(n.text):
			return p.sequence(indent)
		}
		return nil, nil
	case rest[0] == '|' || rest[0] == '>':
		return p.blockScalar(l, indent, rest)
	case rest[0] == '"' || rest[0] == '\'':
		s, n, err := quoted(rest, l.num)
		if err != nil {
			return nil, err
		}
		if after := strings.TrimSpace(rest[n:]); after != "" && !strings.HasPrefix(after, "#") {
			return nil, &yamlError{l.num, "unexpected text after a quoted string"}
		}
		return s, nil
	case rest[0] == '[' || rest[0] == '{':
		// Flow collections are kept as their text; no field the loader
		// reads is one.
		return []any{stripComment(rest)}, nil
	case rest[0] == '&' || rest[0] == '*' || rest[0] == '!':
		return nil, &yamlError{l.num, "anchors, aliases and tags are not supported"}
	}
	return p.plain(stripComment(rest), indent)
}

// plain folds the continuation lines of a multi-line plain scalar. A
// continuation that looks like "key: value" is an indentation mistake, not
// text, and is rejected as YAML parsers do.
func (p *yamlParser) plain(first string, indent int) (any, error) {
	parts := []string{first}
	for p.pos < len(p.lines) {
		l := p.lines[p.pos]
		if l.text == "" {
			// A blank line continues the scalar only if it is followed by a
			// more indented line.
			j := p.pos
			for j < len(p.lines) && p.lines[j].text == "" {
				j++
			}
			if j >= len(p.lines) || p.lines[j].indent <= indent || p.lines[j].blank {
				return scalar(parts), nil
			}
			parts = append(parts, "\n")
			p.pos = j
			continue
		}
		if l.indent <= indent || strings.HasPrefix(l.text, "#") {
			return scalar(parts), nil
		}
		if looksLikeKey(l.text) {
			return nil, &yamlError{l.num, "mapping values are not allowed here (check the indentation)"}
		}
		parts = append(parts, stripComment(l.text))
		p.pos++
	}
	return scalar(parts), nil
}

func scalar(parts []string) any {
	if len(parts) == 1 {
		switch parts[0] {
		case "", "~", "null", "Null", "NULL":
			return nil
		}
	}
	var b strings.Builder
	for i, s := range parts {
		if i > 0 && s != "\n" && parts[i-1] != "\n" {
			b.WriteByte(' ')
		}
		b.WriteString(s)
	}
	return b.String()
}

func stripComment(s string) string {
	for i := 1; i < len(s); i++ {
		if s[i] == '#' && (s[i-1] == ' ' || s[i-1] == '\t') {
			return strings.TrimRight(s[:i], " \t")
		}
	}
	return s
}

// blockScalar parses a literal (|) or folded (>) block scalar.
func (p *yamlParser) blockScalar(l yline, indent int, header string) (any, error) {
	header = stripComment(header)
	folded := header[0] == '>'
	chomp := byte(0)
	explicit := 0
	for _, c := range []byte(header[1:]) {
		switch {
		case (c == '-' || c == '+') && chomp == 0:
			chomp = c
		case c >= '1' && c <= '9' && explicit == 0:
			explicit = int(c - '0')
		default:
			return nil, &yamlError{l.num, "invalid block scalar header"}
		}
	}
	blockIndent := 0
	if explicit > 0 {
		blockIndent = indent + explicit
	}
	var lines []string
	for p.pos < len(p.lines) {
		n := p.lines[p.pos]
		if strings.TrimSpace(n.raw) == "" {
			lines = append(lines, "")
			p.pos++
			continue
		}
		if blockIndent == 0 {
			if n.indent <= indent {
				break
			}
			blockIndent = n.indent
		}
		if n.indent < blockIndent {
			if n.indent > indent {
				return nil, &yamlError{n.num, "block scalar line is less indented than the block"}
			}
			break
		}
		lines = append(lines, strings.TrimRight(n.raw[blockIndent:], "\r"))
		p.pos++
	}
	// Trailing blank lines belong to the chomping, not the content.
	trail := 0
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
		trail++
	}
	var b strings.Builder
	for i, s := range lines {
		if i > 0 {
			prev := lines[i-1]
			if folded && s != "" && prev != "" && !strings.HasPrefix(s, " ") && !strings.HasPrefix(prev, " ") {
				b.WriteByte(' ')
			} else {
				b.WriteByte('\n')
			}
		}
		b.WriteString(s)
	}
	switch {
	case len(lines) == 0:
	case chomp == '-':
	case chomp == '+':
		b.WriteString(strings.Repeat("\n", trail+1))
	default:
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// quoted decodes a single- or double-quoted scalar at the start of s and
// returns it with the number of bytes it spans.
func quoted(s string, line int) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		if q == '\'' {
			if c == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					b.WriteByte('\'')
					i++
					continue
				}
				return b.String(), i + 1, nil
			}
			b.WriteByte(c)
			continue
		}
		switch c {
		case '"':
			return b.String(), i + 1, nil
		case '\\':
			if i+1 >= len(s) {
				return "", 0, &yamlError{line, "unterminated escape in a double-quoted string"}
			}
			i++
			switch e := s[i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case ' ', '"', '\\', '/':
				b.WriteByte(e)
			case 'x', 'u', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
				if i+n >= len(s) {
					return "", 0, &yamlError{line, "short escape in a double-quoted string"}
				}
				v, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
				if err != nil || v > utf8.MaxRune {
					return "", 0, &yamlError{line, "invalid escape in a double-quoted string"}
				}
				b.WriteRune(rune(v))
				i += n
			default:
				return "", 0, &yamlError{line, fmt.Sprintf("unknown escape \\%c in a double-quoted string", e)}
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, &yamlError{line, "unterminated quoted string"}
}

// sequence parses "- item" lines at exactly indent. Items that are mappings
// ("- key: value" plus more keys below) are supported.
func (p *yamlParser) sequence(indent int) ([]any, error) {
	var items []any
	for {
		l, ok := p.next()
		if !ok || l.indent < indent {
			return items, nil
		}
		if l.indent > indent || !isSeqItem(l.text) {
			if l.indent == indent {
				return items, nil
			}
			return nil, &yamlError{l.num, "unexpected indentation in a sequence"}
		}
		body := strings.TrimLeft(strings.TrimPrefix(l.text, "-"), " ")
		if body == "" || strings.HasPrefix(body, "#") {
			p.pos++
			n, ok := p.next()
			if ok && n.indent > indent {
				v, err := p.value(yline{num: l.num, indent: indent}, indent, "")
				if err != nil {
					return nil, err
				}
				items = append(items, v)
				continue
			}
			items = append(items, nil)
			continue
		}
		// Re-read the item as a line indented by its dash and spaces, so a
		// "- key: value" item parses as a mapping at that column.
		inner := l.indent + (len(l.text) - len(body))
		p.lines[p.pos] = yline{num: l.num, indent: inner, text: body, raw: strings.Repeat(" ", inner) + body}
		if looksLikeKey(body) {
			m, err := p.mapping(inner)
			if err != nil {
				return nil, err
			}
			items = append(items, m)
			continue
		}
		p.pos++
		v, err := p.value(p.lines[p.pos-1], inner-1, body)
		if err != nil {
			return nil, err
		}
		items = append(items, v)
	}
}

func looksLikeKey(s string) bool {
	if s == "" || s[0] == '"' || s[0] == '\'' || s[0] == '[' || s[0] == '{' {
		return false
	}
	_, _, err := splitKey(yline{text: s})
	return err == nil
}
