package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// RulesError is a rules-file load error with its location.
type RulesError struct {
	// File is the name given to the parser (usually the path).
	File string
	// Line is the 1-based line of the offending statement, 0 when unknown.
	Line int
	// Msg says what is wrong.
	Msg string
}

// Error renders "file:line: msg".
func (e *RulesError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// LoadRulesDirs reads every *.rules file (sorted by name) of each directory,
// lowest precedence first, into one rule set. A missing directory is skipped.
// On a parse error Codex disables rules for the session with a warning; the
// caller should do the same with the returned error.
func LoadRulesDirs(dirs ...string) (*RuleSet, error) {
	set := NewRuleSet()
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("failed to read rules files from %s: %w", dir, err)
		}
		var files []string
		for _, e := range entries {
			if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".rules") {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
		slices.Sort(files)
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("failed to read rules file %s: %w", f, err)
			}
			if err := set.Parse(f, string(src)); err != nil {
				return nil, err
			}
		}
	}
	return set, nil
}

// ParseRules parses one rules file into a new rule set.
func ParseRules(name, src string) (*RuleSet, error) {
	set := NewRuleSet()
	if err := set.Parse(name, src); err != nil {
		return nil, err
	}
	return set, nil
}

// Parse parses a rules file and adds its rules to s; on error nothing is
// added. The accepted language is the literal subset of Starlark that rules
// files use: calls of prefix_rule, network_rule and host_executable, one per
// statement, with string, list and None arguments (positional or keyword),
// '#' comments, and Starlark string escapes and triple quotes. Example
// commands in match / not_match are validated against the rules of their
// own call, as Codex does at load time.
func (s *RuleSet) Parse(name, src string) error {
	toks, err := lexRules(name, src)
	if err != nil {
		return err
	}
	p := rulesParser{name: name, toks: toks, out: NewRuleSet()}
	s.mu.RLock()
	for k, v := range s.hostExec {
		if p.out.hostExec == nil {
			p.out.hostExec = map[string][]string{}
		}
		p.out.hostExec[k] = slices.Clone(v)
	}
	s.mu.RUnlock()
	if err := p.parse(); err != nil {
		return err
	}
	s.Merge(p.out)
	return nil
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokString
	tokPunct // ( ) [ ] , = ;
	tokNewline
)

type token struct {
	kind tokKind
	text string // identifier, punctuation, or the decoded string
	line int
}

func lexRules(name, src string) ([]token, error) {
	var toks []token
	line, depth := 1, 0
	fail := func(msg string) error { return &RulesError{File: name, Line: line, Msg: msg} }
	if !utf8.ValidString(src) {
		return nil, fail("rules file is not valid UTF-8")
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			if depth == 0 {
				toks = append(toks, token{kind: tokNewline, line: line})
			}
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			line++
			i += 2
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case strings.IndexByte("()[],=;", c) >= 0:
			switch c {
			case '(', '[':
				depth++
			case ')', ']':
				depth--
				if depth < 0 {
					return nil, fail(fmt.Sprintf("unexpected %q", c))
				}
			}
			toks = append(toks, token{kind: tokPunct, text: string(c), line: line})
			i++
		case c == '"' || c == '\'' || (c == 'r' || c == 'R') && i+1 < len(src) && (src[i+1] == '"' || src[i+1] == '\''):
			start := line
			s, n, lines, err := lexString(src[i:])
			if err != nil {
				return nil, fail(err.Error())
			}
			toks = append(toks, token{kind: tokString, text: s, line: start})
			line += lines
			i += n
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			toks = append(toks, token{kind: tokIdent, text: src[i:j], line: line})
			i = j
		default:
			r, _ := utf8.DecodeRuneInString(src[i:])
			return nil, fail(fmt.Sprintf("unsupported syntax %q (rules files may only call prefix_rule, network_rule and host_executable with literal arguments)", r))
		}
	}
	if depth != 0 {
		return nil, fail("unexpected end of file: unclosed bracket")
	}
	return append(toks, token{kind: tokEOF, line: line}), nil
}

// lexString decodes a Starlark string literal at the start of s and returns
// the value, the bytes consumed and the newlines crossed.
func lexString(s string) (string, int, int, error) {
	i := 0
	raw := false
	if s[0] == 'r' || s[0] == 'R' {
		raw = true
		i++
	}
	q := s[i]
	triple := strings.HasPrefix(s[i:], strings.Repeat(string(q), 3))
	if triple {
		i += 3
	} else {
		i++
	}
	var b strings.Builder
	lines := 0
	for i < len(s) {
		c := s[i]
		if triple && strings.HasPrefix(s[i:], strings.Repeat(string(q), 3)) {
			return b.String(), i + 3, lines, nil
		}
		if !triple && c == q {
			return b.String(), i + 1, lines, nil
		}
		if c == '\n' {
			if !triple {
				return "", 0, 0, errors.New("unterminated string literal")
			}
			lines++
		}
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			break
		}
		n := s[i+1]
		if raw {
			// In a raw string a backslash is literal, but still keeps the next
			// quote from ending the string.
			b.WriteByte('\\')
			b.WriteByte(n)
			if n == '\n' {
				lines++
			}
			i += 2
			continue
		}
		i += 2
		switch n {
		case '\n':
			lines++
		case '\\', '\'', '"':
			b.WriteByte(n)
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[n]
			if i+width > len(s) {
				return "", 0, 0, fmt.Errorf("truncated escape \\%c", n)
			}
			v, err := strconv.ParseUint(s[i:i+width], 16, 32)
			if err != nil || !utf8.ValidRune(rune(v)) {
				return "", 0, 0, fmt.Errorf("invalid escape \\%c%s", n, s[i:i+width])
			}
			b.WriteRune(rune(v))
			i += width
		default:
			if n >= '0' && n <= '7' {
				j := i - 1
				for j < len(s) && j < i+2 && s[j] >= '0' && s[j] <= '7' {
					j++
				}
				v, _ := strconv.ParseUint(s[i-1:j], 8, 32)
				b.WriteRune(rune(v))
				i = j
			} else {
				return "", 0, 0, fmt.Errorf("invalid escape sequence \\%c", n)
			}
		}
	}
	return "", 0, 0, errors.New("unterminated string literal")
}

// value is a parsed argument: a string, a list of values, or None.
type value struct {
	str    *string
	list   []value
	isList bool
}

func (v value) isNone() bool { return v.str == nil && !v.isList }

func (v value) typeName() string {
	switch {
	case v.str != nil:
		return "string"
	case v.isList:
		return "list"
	default:
		return "NoneType"
	}
}

type rulesParser struct {
	name string
	toks []token
	pos  int
	out  *RuleSet
}

func (p *rulesParser) peek() token { return p.toks[p.pos] }

func (p *rulesParser) next() token {
	t := p.toks[p.pos]
	if t.kind != tokEOF {
		p.pos++
	}
	return t
}

func (p *rulesParser) errAt(t token, format string, args ...any) error {
	return &RulesError{File: p.name, Line: t.line, Msg: fmt.Sprintf(format, args...)}
}

func (p *rulesParser) expect(punct string) error {
	t := p.next()
	if t.kind != tokPunct || t.text != punct {
		return p.errAt(t, "expected %q", punct)
	}
	return nil
}

func (p *rulesParser) parse() error {
	for {
		t := p.peek()
		switch {
		case t.kind == tokEOF:
			return nil
		case t.kind == tokNewline || t.kind == tokPunct && t.text == ";":
			p.next()
			continue
		case t.kind != tokIdent:
			return p.errAt(t, "expected a rule call")
		}
		if err := p.call(); err != nil {
			return err
		}
		if t := p.peek(); t.kind != tokEOF && t.kind != tokNewline && !(t.kind == tokPunct && t.text == ";") {
			return p.errAt(t, "expected a new line after a statement")
		}
	}
}

var ruleParams = map[string][]string{
	"prefix_rule":     {"pattern", "decision", "match", "not_match", "justification"},
	"network_rule":    {"host", "protocol", "decision", "justification"},
	"host_executable": {"name", "paths"},
}

func (p *rulesParser) call() error {
	fn := p.next()
	params, ok := ruleParams[fn.text]
	if !ok {
		return p.errAt(fn, "unsupported statement %q (only prefix_rule, network_rule and host_executable are supported)", fn.text)
	}
	if err := p.expect("("); err != nil {
		return err
	}
	args := map[string]value{}
	positional := 0
	sawKeyword := false
	for {
		t := p.peek()
		if t.kind == tokPunct && t.text == ")" {
			p.next()
			break
		}
		name := ""
		if t.kind == tokIdent && p.toks[p.pos+1].kind == tokPunct && p.toks[p.pos+1].text == "=" {
			name = t.text
			p.pos += 2
			if !slices.Contains(params, name) {
				return p.errAt(t, "%s() got an unexpected keyword argument %q", fn.text, name)
			}
			sawKeyword = true
		} else {
			if sawKeyword {
				return p.errAt(t, "positional argument after a keyword argument")
			}
			if positional >= len(params) {
				return p.errAt(t, "%s() takes at most %d arguments", fn.text, len(params))
			}
			name = params[positional]
			positional++
		}
		if _, dup := args[name]; dup {
			return p.errAt(t, "%s() got multiple values for %q", fn.text, name)
		}
		v, err := p.value()
		if err != nil {
			return err
		}
		args[name] = v
		if t := p.peek(); t.kind == tokPunct && t.text == "," {
			p.next()
		} else if !(t.kind == tokPunct && t.text == ")") {
			return p.errAt(t, "expected ',' or ')'")
		}
	}
	var err error
	switch fn.text {
	case "prefix_rule":
		err = p.prefixRule(args)
	case "network_rule":
		err = p.networkRule(args)
	default:
		err = p.hostExecutable(args)
	}
	if err != nil {
		return p.errAt(fn, "%s", err.Error())
	}
	return nil
}

func (p *rulesParser) value() (value, error) {
	t := p.next()
	switch {
	case t.kind == tokString:
		s := t.text
		return value{str: &s}, nil
	case t.kind == tokIdent && t.text == "None":
		return value{}, nil
	case t.kind == tokPunct && t.text == "[":
		v := value{isList: true}
		for {
			if t := p.peek(); t.kind == tokPunct && t.text == "]" {
				p.next()
				return v, nil
			}
			item, err := p.value()
			if err != nil {
				return value{}, err
			}
			v.list = append(v.list, item)
			if t := p.peek(); t.kind == tokPunct && t.text == "," {
				p.next()
			} else if !(t.kind == tokPunct && t.text == "]") {
				return value{}, p.errAt(t, "expected ',' or ']'")
			}
		}
	}
	return value{}, p.errAt(t, "expected a string, a list or None")
}

func optString(args map[string]value, name string) (string, bool, error) {
	v, ok := args[name]
	if !ok || v.isNone() {
		return "", false, nil
	}
	if v.str == nil {
		return "", false, fmt.Errorf("%s must be a string (got %s)", name, v.typeName())
	}
	return *v.str, true, nil
}

func reqString(args map[string]value, fn, name string) (string, error) {
	s, ok, err := optString(args, name)
	if err == nil && !ok {
		err = fmt.Errorf("%s() missing required argument %q", fn, name)
	}
	return s, err
}

func justification(args map[string]value) (string, error) {
	j, ok, err := optString(args, "justification")
	if err == nil && ok && strings.TrimSpace(j) == "" {
		err = errors.New("justification cannot be empty")
	}
	return j, err
}

func (p *rulesParser) prefixRule(args map[string]value) error {
	pv, ok := args["pattern"]
	if !ok || pv.isNone() {
		return errors.New(`prefix_rule() missing required argument "pattern"`)
	}
	if !pv.isList {
		return fmt.Errorf("pattern must be a list (got %s)", pv.typeName())
	}
	if len(pv.list) == 0 {
		return errors.New("pattern cannot be empty")
	}
	pattern := make([][]string, len(pv.list))
	for i, el := range pv.list {
		switch {
		case el.str != nil:
			pattern[i] = []string{*el.str}
		case el.isList:
			if len(el.list) == 0 {
				return errors.New("pattern alternatives cannot be empty")
			}
			for _, alt := range el.list {
				if alt.str == nil {
					return fmt.Errorf("pattern alternative must be a string (got %s)", alt.typeName())
				}
				pattern[i] = append(pattern[i], *alt.str)
			}
		default:
			return fmt.Errorf("pattern element must be a string or list of strings (got %s)", el.typeName())
		}
	}
	decision := Allow
	if d, ok, err := optString(args, "decision"); err != nil {
		return err
	} else if ok {
		if decision, err = ParseDecision(d); err != nil {
			return err
		}
	}
	just, err := justification(args)
	if err != nil {
		return err
	}
	matches, err := examples(args, "match")
	if err != nil {
		return err
	}
	notMatches, err := examples(args, "not_match")
	if err != nil {
		return err
	}
	// One rule per alternative program.
	local := NewRuleSet()
	local.hostExec = p.out.hostExec
	var rules []*PrefixRule
	for _, head := range pattern[0] {
		pat := append([][]string{{head}}, pattern[1:]...)
		rules = append(rules, &PrefixRule{Pattern: pat, Decision: decision, Justification: just})
	}
	for _, r := range rules {
		local.addLocked(r)
	}
	for _, ex := range notMatches {
		if m := matchesFor([]*RuleSet{local}, ex); len(m) > 0 {
			return fmt.Errorf("example %s matches rule %s but is listed in not_match", ShellJoin(ex), m[0].Rule)
		}
	}
	var unmatched []string
	for _, ex := range matches {
		if len(matchesFor([]*RuleSet{local}, ex)) == 0 {
			unmatched = append(unmatched, ShellJoin(ex))
		}
	}
	if len(unmatched) > 0 {
		return fmt.Errorf("examples do not match the rule: %s", strings.Join(unmatched, ", "))
	}
	p.out.mu.Lock()
	for _, r := range rules {
		p.out.addLocked(r)
	}
	p.out.mu.Unlock()
	return nil
}

// examples reads a match / not_match list: each example is a shell-split
// string or a list of strings, never empty.
func examples(args map[string]value, name string) ([][]string, error) {
	v, ok := args[name]
	if !ok || v.isNone() {
		return nil, nil
	}
	if !v.isList {
		return nil, fmt.Errorf("%s must be a list (got %s)", name, v.typeName())
	}
	var out [][]string
	for _, ex := range v.list {
		var words []string
		switch {
		case ex.str != nil:
			w, ok := ShellSplit(*ex.str)
			if !ok {
				return nil, errors.New("example string has invalid shell syntax")
			}
			words = w
		case ex.isList:
			for _, t := range ex.list {
				if t.str == nil {
					return nil, fmt.Errorf("example tokens must be strings (got %s)", t.typeName())
				}
				words = append(words, *t.str)
			}
		default:
			return nil, fmt.Errorf("example must be a string or list of strings (got %s)", ex.typeName())
		}
		if len(words) == 0 {
			return nil, errors.New("example cannot be empty")
		}
		out = append(out, words)
	}
	return out, nil
}

func (p *rulesParser) networkRule(args map[string]value) error {
	host, err := reqString(args, "network_rule", "host")
	if err != nil {
		return err
	}
	proto, err := reqString(args, "network_rule", "protocol")
	if err != nil {
		return err
	}
	switch proto {
	case "http", "socks5_tcp", "socks5_udp":
	case "https", "https_connect", "http-connect":
		proto = "https"
	default:
		return fmt.Errorf("network_rule protocol must be one of http, https, socks5_tcp, socks5_udp (got %s)", proto)
	}
	ds, err := reqString(args, "network_rule", "decision")
	if err != nil {
		return err
	}
	var d Decision
	if ds == "deny" {
		d = Forbidden
	} else if d, err = ParseDecision(ds); err != nil {
		return err
	}
	just, err := justification(args)
	if err != nil {
		return err
	}
	h, err := normalizeHost(host)
	if err != nil {
		return err
	}
	p.out.network = append(p.out.network, NetworkRule{Host: h, Protocol: proto, Decision: d, Justification: just})
	return nil
}

// normalizeHost lower-cases a host, strips a port and a trailing dot, and
// refuses schemes, paths, wildcards and blanks.
func normalizeHost(raw string) (string, error) {
	h := strings.TrimSpace(raw)
	if h == "" {
		return "", errors.New("network_rule host cannot be empty")
	}
	if strings.ContainsAny(h, "/?#") {
		return "", errors.New("network_rule host must be a hostname or IP literal (without scheme or path)")
	}
	if strings.HasPrefix(h, "[") {
		inside, rest, ok := strings.Cut(h[1:], "]")
		if !ok {
			return "", errors.New("network_rule host has an invalid bracketed IPv6 literal")
		}
		if rest != "" && (!strings.HasPrefix(rest, ":") || !allDigits(rest[1:])) {
			return "", fmt.Errorf("network_rule host contains an unsupported suffix: %s", raw)
		}
		h = inside
	} else if strings.Count(h, ":") == 1 {
		if name, port, _ := strings.Cut(h, ":"); name != "" && allDigits(port) {
			h = name
		}
	}
	h = strings.ToLower(strings.TrimSpace(strings.TrimRight(h, ".")))
	switch {
	case h == "":
		return "", errors.New("network_rule host cannot be empty")
	case strings.Contains(h, "*"):
		return "", errors.New("network_rule host must be a specific host; wildcards are not allowed")
	case strings.ContainsAny(h, " \t\r\n"):
		return "", errors.New("network_rule host cannot contain whitespace")
	}
	return h, nil
}

func (p *rulesParser) hostExecutable(args map[string]value) error {
	name, err := reqString(args, "host_executable", "name")
	if err != nil {
		return err
	}
	if name == "" || strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return fmt.Errorf("host_executable name must be a bare executable name (got %s)", name)
	}
	pv, ok := args["paths"]
	if !ok || !pv.isList {
		return errors.New("host_executable paths must be a list of strings")
	}
	var paths []string
	for _, v := range pv.list {
		if v.str == nil {
			return fmt.Errorf("host_executable paths must be strings (got %s)", v.typeName())
		}
		raw := *v.str
		path := raw
		if strings.HasPrefix(raw, "~/") {
			home, err := os.UserHomeDir()
			if err != nil {
				return fmt.Errorf("host_executable path %s: %w", raw, err)
			}
			path = filepath.Join(home, raw[2:])
		}
		if !filepath.IsAbs(path) {
			return fmt.Errorf("host_executable paths must be absolute or use `~/...` home-relative syntax (got %s)", raw)
		}
		path = filepath.Clean(path)
		if filepath.Base(path) != name {
			return fmt.Errorf("host_executable path `%s` must have basename `%s`", raw, name)
		}
		if !slices.Contains(paths, path) {
			paths = append(paths, path)
		}
	}
	if p.out.hostExec == nil {
		p.out.hostExec = map[string][]string{}
	}
	p.out.hostExec[name] = paths
	return nil
}
