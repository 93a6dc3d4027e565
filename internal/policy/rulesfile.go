package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	starresolve "go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
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

// MaxRulesSteps bounds the Starlark computation of one rules file. A rules
// file is read by the daemon at thread start, so a file that loops for ever
// (a loop over a huge range) must fail instead of hanging it; a rule
// statement takes about ten steps, so the bound leaves room for tens of
// thousands of rules.
const MaxRulesSteps = 1_000_000

// rulesFileOptions is the Starlark dialect of rules files. Top-level for
// and if statements and reassigned globals are allowed, as the reference
// implementation's dialect does; while loops and recursion stay off, so
// every loop ranges over a finite value and the step limit is the only
// bound that is ever needed.
var rulesFileOptions = &syntax.FileOptions{
	TopLevelControl: true,
	GlobalReassign:  true,
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

// Parse evaluates a rules file, a Starlark program, and adds the rules it
// declares to s; on error nothing is added. The program sees the Starlark
// built-ins plus prefix_rule, network_rule and host_executable; variables,
// functions, loops and expressions are evaluated as Starlark does, without
// while loops, recursion or load, and within MaxRulesSteps. After the file
// has run, the match / not_match examples of each prefix_rule call are
// checked against the rules of that call (with every host_executable the
// file and the set declare), as Codex does at load time. Every error names
// the file and, where known, the line.
func (s *RuleSet) Parse(name, src string) error {
	if !utf8.ValidString(src) {
		return &RulesError{File: name, Msg: "rules file is not valid UTF-8"}
	}
	ev := &rulesEval{name: name, out: NewRuleSet()}
	s.mu.RLock()
	for k, v := range s.hostExec {
		if ev.out.hostExec == nil {
			ev.out.hostExec = map[string][]string{}
		}
		ev.out.hostExec[k] = slices.Clone(v)
	}
	s.mu.RUnlock()
	thread := &starlark.Thread{
		Name: "rules " + name,
		// print() output has nowhere useful to go in a daemon, and a rules
		// file must not be able to write to its stderr.
		Print: func(*starlark.Thread, string) {},
	}
	thread.SetMaxExecutionSteps(MaxRulesSteps)
	if _, err := starlark.ExecFileOptions(rulesFileOptions, thread, name, src, ev.builtins()); err != nil {
		return ev.locate(err)
	}
	if err := ev.checkExamples(); err != nil {
		return err
	}
	s.Merge(ev.out)
	return nil
}

// rulesEval is the state of one rules-file evaluation: what the file
// declared so far and the examples still to check.
type rulesEval struct {
	name    string
	out     *RuleSet
	pending []pendingExamples
}

// pendingExamples are the match / not_match examples of one prefix_rule
// call, checked once the whole file has run so a host_executable declared
// later in the file counts, as in the reference implementation.
type pendingExamples struct {
	rules      []*PrefixRule
	matches    [][]string
	notMatches [][]string
	line       int
}

func (ev *rulesEval) builtins() starlark.StringDict {
	return starlark.StringDict{
		"prefix_rule":     starlark.NewBuiltin("prefix_rule", ev.prefixRule),
		"network_rule":    starlark.NewBuiltin("network_rule", ev.networkRule),
		"host_executable": starlark.NewBuiltin("host_executable", ev.hostExecutable),
	}
}

// fail is the error of a rule built-in: the message at the line of the
// statement in the file that called it.
func (ev *rulesEval) fail(thread *starlark.Thread, err error) error {
	return &RulesError{File: ev.name, Line: int(thread.CallFrame(1).Pos.Line), Msg: err.Error()}
}

// locate turns a Starlark error into a RulesError at the line it names.
func (ev *rulesEval) locate(err error) error {
	var re *RulesError
	if errors.As(err, &re) {
		return re
	}
	var se syntax.Error
	var rl starresolve.ErrorList
	var ee *starlark.EvalError
	switch {
	case errors.As(err, &se):
		return &RulesError{File: ev.name, Line: int(se.Pos.Line), Msg: se.Msg}
	case errors.As(err, &rl):
		return &RulesError{File: ev.name, Line: int(rl[0].Pos.Line), Msg: rl[0].Msg}
	case errors.As(err, &ee):
		// The innermost frame in this file is the statement that failed; the
		// frames above it are built-ins.
		line := 0
		for i := len(ee.CallStack) - 1; i >= 0; i-- {
			if pos := ee.CallStack[i].Pos; pos.Filename() == ev.name {
				line = int(pos.Line)
				break
			}
		}
		return &RulesError{File: ev.name, Line: line, Msg: ee.Msg}
	}
	return &RulesError{File: ev.name, Msg: err.Error()}
}

// optional returns v, or nil when the argument was left out or is None.
func optional(v starlark.Value) starlark.Value {
	if v == starlark.None {
		return nil
	}
	return v
}

// str returns v as a Go string; rule words and hosts are text, as in the
// reference implementation whose Starlark strings are always UTF-8.
func str(v starlark.Value, what string) (string, error) {
	s, ok := v.(starlark.String)
	if !ok {
		return "", fmt.Errorf("%s must be a string (got %s)", what, v.Type())
	}
	if !utf8.ValidString(string(s)) {
		return "", fmt.Errorf("%s is not valid UTF-8", what)
	}
	return string(s), nil
}

// optString reads an optional string argument.
func optString(v starlark.Value, name string) (string, bool, error) {
	if v = optional(v); v == nil {
		return "", false, nil
	}
	s, err := str(v, name)
	return s, err == nil, err
}

// list returns the elements of a Starlark list.
func list(v starlark.Value, what string) ([]starlark.Value, error) {
	l, ok := v.(*starlark.List)
	if !ok {
		return nil, fmt.Errorf("%s must be a list (got %s)", what, v.Type())
	}
	out := make([]starlark.Value, l.Len())
	for i := range out {
		out[i] = l.Index(i)
	}
	return out, nil
}

func justification(v starlark.Value) (string, error) {
	j, ok, err := optString(v, "justification")
	if err == nil && ok && strings.TrimSpace(j) == "" {
		err = errors.New("justification cannot be empty")
	}
	return j, err
}

// prefixRule implements prefix_rule(pattern, decision, match, not_match,
// justification).
func (ev *rulesEval) prefixRule(thread *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var patternV, decisionV, matchV, notMatchV, justV starlark.Value
	if err := starlark.UnpackArgs(fn.Name(), args, kwargs,
		"pattern", &patternV, "decision?", &decisionV, "match?", &matchV,
		"not_match?", &notMatchV, "justification?", &justV); err != nil {
		return nil, err
	}
	rules, matches, notMatches, err := buildPrefixRules(patternV, decisionV, matchV, notMatchV, justV)
	if err != nil {
		return nil, ev.fail(thread, err)
	}
	ev.pending = append(ev.pending, pendingExamples{
		rules: rules, matches: matches, notMatches: notMatches,
		line: int(thread.CallFrame(1).Pos.Line),
	})
	ev.out.mu.Lock()
	for _, r := range rules {
		ev.out.addLocked(r)
	}
	ev.out.mu.Unlock()
	return starlark.None, nil
}

// buildPrefixRules checks the arguments of one prefix_rule call and returns
// one rule per alternative program with the call's examples.
func buildPrefixRules(patternV, decisionV, matchV, notMatchV, justV starlark.Value) (rules []*PrefixRule, matches, notMatches [][]string, err error) {
	if optional(patternV) == nil {
		return nil, nil, nil, errors.New(`prefix_rule() missing required argument "pattern"`)
	}
	elems, err := list(patternV, "pattern")
	if err != nil {
		return nil, nil, nil, err
	}
	if len(elems) == 0 {
		return nil, nil, nil, errors.New("pattern cannot be empty")
	}
	pattern := make([][]string, len(elems))
	for i, el := range elems {
		switch el := el.(type) {
		case starlark.String:
			w, err := str(el, "pattern element")
			if err != nil {
				return nil, nil, nil, err
			}
			pattern[i] = []string{w}
		case *starlark.List:
			if el.Len() == 0 {
				return nil, nil, nil, errors.New("pattern alternatives cannot be empty")
			}
			for j := range el.Len() {
				alt, err := str(el.Index(j), "pattern alternative")
				if err != nil {
					return nil, nil, nil, err
				}
				pattern[i] = append(pattern[i], alt)
			}
		default:
			return nil, nil, nil, fmt.Errorf("pattern element must be a string or list of strings (got %s)", el.Type())
		}
	}
	decision := Allow
	if d, ok, err := optString(decisionV, "decision"); err != nil {
		return nil, nil, nil, err
	} else if ok {
		if decision, err = ParseDecision(d); err != nil {
			return nil, nil, nil, err
		}
	}
	just, err := justification(justV)
	if err != nil {
		return nil, nil, nil, err
	}
	if matches, err = examples(matchV, "match"); err != nil {
		return nil, nil, nil, err
	}
	if notMatches, err = examples(notMatchV, "not_match"); err != nil {
		return nil, nil, nil, err
	}
	for _, head := range pattern[0] {
		pat := append([][]string{{head}}, pattern[1:]...)
		rules = append(rules, &PrefixRule{Pattern: pat, Decision: decision, Justification: just})
	}
	return rules, matches, notMatches, nil
}

// checkExamples checks every prefix_rule call's examples against the rules
// of that call alone.
func (ev *rulesEval) checkExamples() error {
	for _, p := range ev.pending {
		local := NewRuleSet()
		local.hostExec = ev.out.hostExec
		for _, r := range p.rules {
			local.addLocked(r)
		}
		fail := func(format string, args ...any) error {
			return &RulesError{File: ev.name, Line: p.line, Msg: fmt.Sprintf(format, args...)}
		}
		for _, ex := range p.notMatches {
			if m := matchesFor([]*RuleSet{local}, ex); len(m) > 0 {
				return fail("example %s matches rule %s but is listed in not_match", ShellJoin(ex), m[0].Rule)
			}
		}
		var unmatched []string
		for _, ex := range p.matches {
			if len(matchesFor([]*RuleSet{local}, ex)) == 0 {
				unmatched = append(unmatched, ShellJoin(ex))
			}
		}
		if len(unmatched) > 0 {
			return fail("examples do not match the rule: %s", strings.Join(unmatched, ", "))
		}
	}
	return nil
}

// examples reads a match / not_match list: each example is a shell-split
// string or a list of strings, never empty.
func examples(v starlark.Value, name string) ([][]string, error) {
	if v = optional(v); v == nil {
		return nil, nil
	}
	items, err := list(v, name)
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, ex := range items {
		var words []string
		switch ex := ex.(type) {
		case starlark.String:
			s, err := str(ex, "example")
			if err != nil {
				return nil, err
			}
			w, ok := ShellSplit(s)
			if !ok {
				return nil, errors.New("example string has invalid shell syntax")
			}
			words = w
		case *starlark.List:
			for j := range ex.Len() {
				w, err := str(ex.Index(j), "example token")
				if err != nil {
					return nil, err
				}
				words = append(words, w)
			}
		default:
			return nil, fmt.Errorf("example must be a string or list of strings (got %s)", ex.Type())
		}
		if len(words) == 0 {
			return nil, errors.New("example cannot be empty")
		}
		out = append(out, words)
	}
	return out, nil
}

// networkRule implements network_rule(host, protocol, decision,
// justification).
func (ev *rulesEval) networkRule(thread *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var hostV, protoV, decisionV, justV starlark.Value
	if err := starlark.UnpackArgs(fn.Name(), args, kwargs,
		"host", &hostV, "protocol", &protoV, "decision", &decisionV, "justification?", &justV); err != nil {
		return nil, err
	}
	r, err := buildNetworkRule(hostV, protoV, decisionV, justV)
	if err != nil {
		return nil, ev.fail(thread, err)
	}
	ev.out.network = append(ev.out.network, r)
	return starlark.None, nil
}

func buildNetworkRule(hostV, protoV, decisionV, justV starlark.Value) (NetworkRule, error) {
	host, err := str(hostV, "network_rule host")
	if err != nil {
		return NetworkRule{}, err
	}
	proto, err := str(protoV, "network_rule protocol")
	if err != nil {
		return NetworkRule{}, err
	}
	switch proto {
	case "http", "socks5_tcp", "socks5_udp":
	case "https", "https_connect", "http-connect":
		proto = "https"
	default:
		return NetworkRule{}, fmt.Errorf("network_rule protocol must be one of http, https, socks5_tcp, socks5_udp (got %s)", proto)
	}
	ds, err := str(decisionV, "network_rule decision")
	if err != nil {
		return NetworkRule{}, err
	}
	var d Decision
	if ds == "deny" {
		d = Forbidden
	} else if d, err = ParseDecision(ds); err != nil {
		return NetworkRule{}, err
	}
	just, err := justification(justV)
	if err != nil {
		return NetworkRule{}, err
	}
	h, err := normalizeHost(host)
	if err != nil {
		return NetworkRule{}, err
	}
	return NetworkRule{Host: h, Protocol: proto, Decision: d, Justification: just}, nil
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

// hostExecutable implements host_executable(name, paths).
func (ev *rulesEval) hostExecutable(thread *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var nameV, pathsV starlark.Value
	if err := starlark.UnpackArgs(fn.Name(), args, kwargs, "name", &nameV, "paths", &pathsV); err != nil {
		return nil, err
	}
	name, paths, err := buildHostExecutable(nameV, pathsV)
	if err != nil {
		return nil, ev.fail(thread, err)
	}
	if ev.out.hostExec == nil {
		ev.out.hostExec = map[string][]string{}
	}
	ev.out.hostExec[name] = paths
	return starlark.None, nil
}

func buildHostExecutable(nameV, pathsV starlark.Value) (string, []string, error) {
	name, err := str(nameV, "host_executable name")
	if err != nil {
		return "", nil, err
	}
	if name == "" || strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return "", nil, fmt.Errorf("host_executable name must be a bare executable name (got %s)", name)
	}
	items, err := list(pathsV, "host_executable paths")
	if err != nil {
		return "", nil, err
	}
	var paths []string
	for _, v := range items {
		raw, err := str(v, "host_executable paths")
		if err != nil {
			return "", nil, err
		}
		path := raw
		if strings.HasPrefix(raw, "~/") {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", nil, fmt.Errorf("host_executable path %s: %w", raw, err)
			}
			path = filepath.Join(home, raw[2:])
		}
		if !filepath.IsAbs(path) {
			return "", nil, fmt.Errorf("host_executable paths must be absolute or use `~/...` home-relative syntax (got %s)", raw)
		}
		path = filepath.Clean(path)
		if filepath.Base(path) != name {
			return "", nil, fmt.Errorf("host_executable path `%s` must have basename `%s`", raw, name)
		}
		if !slices.Contains(paths, path) {
			paths = append(paths, path)
		}
	}
	return name, paths, nil
}
