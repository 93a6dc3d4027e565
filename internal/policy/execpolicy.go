package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Decision is an exec-policy verdict, ordered by strictness: the strictest
// decision over all matches wins.
type Decision int

// The decisions, least strict first.
const (
	// Allow runs the command without asking.
	Allow Decision = iota
	// Prompt asks the user first ("needs approval").
	Prompt
	// Forbidden refuses to run the command.
	Forbidden
)

// ParseDecision parses "allow", "prompt" or "forbidden".
func ParseDecision(s string) (Decision, error) {
	switch s {
	case "allow":
		return Allow, nil
	case "prompt":
		return Prompt, nil
	case "forbidden":
		return Forbidden, nil
	}
	return 0, fmt.Errorf("invalid decision: %s", s)
}

// String returns the rules-file spelling of the decision.
func (d Decision) String() string {
	switch d {
	case Prompt:
		return "prompt"
	case Forbidden:
		return "forbidden"
	default:
		return "allow"
	}
}

// PrefixRule matches commands whose argv starts with Pattern.
type PrefixRule struct {
	// Pattern has one entry per argv position; each entry lists the accepted
	// words (one word, or alternatives). Pattern[0] has exactly one word:
	// a rule written with alternative programs becomes one rule per program.
	Pattern [][]string
	// Decision is what a match decides.
	Decision Decision
	// Justification explains the rule; it is quoted in reasons when set.
	Justification string
}

// Program is the argv[0] the rule is keyed by.
func (r *PrefixRule) Program() string { return r.Pattern[0][0] }

// matchPrefix returns the matched argv prefix, or nil.
func (r *PrefixRule) matchPrefix(cmd []string) []string {
	if len(cmd) < len(r.Pattern) {
		return nil
	}
	for i, alts := range r.Pattern {
		if !slices.Contains(alts, cmd[i]) {
			return nil
		}
	}
	return slices.Clone(cmd[:len(r.Pattern)])
}

// String renders the rule in rules-file syntax.
func (r *PrefixRule) String() string {
	toks := make([]string, len(r.Pattern))
	for i, alts := range r.Pattern {
		if len(alts) == 1 {
			toks[i] = jsonString(alts[0])
		} else {
			q := make([]string, len(alts))
			for j, a := range alts {
				q[j] = jsonString(a)
			}
			toks[i] = "[" + strings.Join(q, ", ") + "]"
		}
	}
	s := fmt.Sprintf("prefix_rule(pattern=[%s], decision=%q", strings.Join(toks, ", "), r.Decision.String())
	if r.Justification != "" {
		s += ", justification=" + jsonString(r.Justification)
	}
	return s + ")"
}

// NetworkRule is a host rule from a rules file (current Codex); it is kept
// for callers that enforce network policy.
type NetworkRule struct {
	// Host is the normalized host name.
	Host string
	// Protocol is "http", "https", "socks5_tcp" or "socks5_udp".
	Protocol string
	// Decision is Allow, Prompt or Forbidden ("deny" in the file).
	Decision Decision
	// Justification is optional.
	Justification string
}

// RuleSet is a set of exec-policy rules keyed by program. It is safe for
// concurrent use; the zero value is an empty set.
type RuleSet struct {
	mu        sync.RWMutex
	byProgram map[string][]*PrefixRule
	network   []NetworkRule
	hostExec  map[string][]string // bare name -> absolute paths
}

// NewRuleSet returns an empty rule set.
func NewRuleSet() *RuleSet { return &RuleSet{} }

// Add adds rules (in order, after the existing ones).
func (s *RuleSet) Add(rules ...*PrefixRule) error {
	for _, r := range rules {
		if err := validateRule(r); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rules {
		s.addLocked(r)
	}
	return nil
}

func validateRule(r *PrefixRule) error {
	if r == nil || len(r.Pattern) == 0 {
		return errors.New("pattern cannot be empty")
	}
	if len(r.Pattern[0]) != 1 {
		return errors.New("the first pattern element must be a single program")
	}
	for _, alts := range r.Pattern {
		if len(alts) == 0 {
			return errors.New("pattern alternatives cannot be empty")
		}
	}
	if r.Justification != "" && strings.TrimSpace(r.Justification) == "" {
		return errors.New("justification cannot be empty")
	}
	return nil
}

func (s *RuleSet) addLocked(r *PrefixRule) {
	if s.byProgram == nil {
		s.byProgram = map[string][]*PrefixRule{}
	}
	s.byProgram[r.Program()] = append(s.byProgram[r.Program()], r)
}

// AddPrefixRule adds a rule matching exactly the words of prefix; this is how
// an accepted amendment updates the in-memory policy.
func (s *RuleSet) AddPrefixRule(prefix []string, d Decision) error {
	if len(prefix) == 0 {
		return errors.New("prefix cannot be empty")
	}
	pat := make([][]string, len(prefix))
	for i, w := range prefix {
		pat[i] = []string{w}
	}
	return s.Add(&PrefixRule{Pattern: pat, Decision: d})
}

// Rules returns a snapshot of every prefix rule, grouped by program in
// program order.
func (s *RuleSet) Rules() []*PrefixRule {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	progs := make([]string, 0, len(s.byProgram))
	for p := range s.byProgram {
		progs = append(progs, p)
	}
	slices.Sort(progs)
	var out []*PrefixRule
	for _, p := range progs {
		out = append(out, s.byProgram[p]...)
	}
	return out
}

// NetworkRules returns the network rules read from rules files.
func (s *RuleSet) NetworkRules() []NetworkRule {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.network)
}

// Merge adds every rule of other after this set's rules (other overlays s).
func (s *RuleSet) Merge(other *RuleSet) {
	if other == nil || other == s {
		return
	}
	rules := other.Rules()
	other.mu.RLock()
	network := slices.Clone(other.network)
	hostExec := map[string][]string{}
	for k, v := range other.hostExec {
		hostExec[k] = slices.Clone(v)
	}
	other.mu.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rules {
		s.addLocked(r)
	}
	s.network = append(s.network, network...)
	for k, v := range hostExec {
		if s.hostExec == nil {
			s.hostExec = map[string][]string{}
		}
		s.hostExec[k] = v
	}
}

// MatchKind tells a rule match from a heuristic verdict.
type MatchKind int

// The match kinds.
const (
	// RuleMatch is a prefix rule that matched.
	RuleMatch MatchKind = iota
	// HeuristicMatch is the unmatched-command heuristic's verdict for a
	// command no rule matched.
	HeuristicMatch
)

// Match is one entry of an evaluation: a matching rule or, for a command no
// rule matched, the heuristic's decision.
type Match struct {
	// Kind says whether a rule or the heuristic decided.
	Kind MatchKind
	// Decision is the verdict.
	Decision Decision
	// Command is the (sub-)command that was evaluated.
	Command []string
	// MatchedPrefix is the argv prefix the rule matched (RuleMatch only).
	MatchedPrefix []string
	// Rule is the matching rule (RuleMatch only).
	Rule *PrefixRule
	// Justification is the rule's justification (RuleMatch only).
	Justification string
}

// Evaluation is the result of checking commands against rules.
type Evaluation struct {
	// Decision is the strictest decision over Matches.
	Decision Decision
	// Matches are every rule match and heuristic verdict, in command order.
	Matches []Match
}

// HasRuleMatch reports whether any rule (not the heuristic) matched.
func (e Evaluation) HasRuleMatch() bool {
	return slices.ContainsFunc(e.Matches, func(m Match) bool { return m.Kind == RuleMatch })
}

// Fallback decides for a command no rule matches.
type Fallback func(cmd []string) Decision

// matchesFor returns the rule matches for one command across sets (each set
// keyed by argv[0]; an absolute argv[0] also matches rules for its basename
// when a host_executable declaration lists that path).
func matchesFor(sets []*RuleSet, cmd []string) []Match {
	if len(cmd) == 0 {
		return nil
	}
	var out []Match
	for _, s := range sets {
		if s == nil {
			continue
		}
		s.mu.RLock()
		rules := s.byProgram[cmd[0]]
		lookup := cmd
		if len(rules) == 0 && filepath.IsAbs(cmd[0]) {
			base := filepath.Base(cmd[0])
			if slices.Contains(s.hostExec[base], filepath.Clean(cmd[0])) {
				rules = s.byProgram[base]
				lookup = append([]string{base}, cmd[1:]...)
			}
		}
		for _, r := range rules {
			if p := r.matchPrefix(lookup); p != nil {
				out = append(out, Match{Kind: RuleMatch, Decision: r.Decision, Command: cmd, MatchedPrefix: p, Rule: r, Justification: r.Justification})
			}
		}
		s.mu.RUnlock()
	}
	return out
}

// Check evaluates commands against the rule sets: per command, every
// matching rule, or the fallback's verdict when none matches (or Allow when
// fallback is nil). The decision is the strictest of all.
func Check(sets []*RuleSet, commands [][]string, fallback Fallback) Evaluation {
	var ev Evaluation
	for _, c := range commands {
		m := matchesFor(sets, c)
		if len(m) == 0 {
			d := Allow
			if fallback != nil {
				d = fallback(c)
			}
			m = []Match{{Kind: HeuristicMatch, Decision: d, Command: slices.Clone(c)}}
		}
		ev.Matches = append(ev.Matches, m...)
	}
	for _, m := range ev.Matches {
		ev.Decision = max(ev.Decision, m.Decision)
	}
	return ev
}

// Check evaluates one command against this set; see the package-level Check.
func (s *RuleSet) Check(cmd []string, fallback Fallback) Evaluation {
	return Check([]*RuleSet{s}, [][]string{cmd}, fallback)
}

// FormatAllowRule renders the line an accepted amendment appends to
// default.rules: prefix_rule(pattern=["a", "b"], decision="allow").
func FormatAllowRule(prefix []string) string {
	toks := make([]string, len(prefix))
	for i, w := range prefix {
		toks[i] = jsonString(w)
	}
	return fmt.Sprintf(`prefix_rule(pattern=[%s], decision="allow")`, strings.Join(toks, ", "))
}

// DefaultRulesFile is where accepted amendments are written, under the codex
// home directory.
func DefaultRulesFile(codexHome string) string {
	return filepath.Join(codexHome, "rules", "default.rules")
}

var appendMu sync.Mutex

// AppendAllowRule appends FormatAllowRule(prefix) as a line to the rules file
// at path, creating the file and its directory; a line already present is not
// repeated, and a missing final newline is added first.
func AppendAllowRule(path string, prefix []string) error {
	if len(prefix) == 0 {
		return errors.New("prefix rule requires at least one token")
	}
	line := FormatAllowRule(prefix)
	appendMu.Lock()
	defer appendMu.Unlock()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("failed to create policy directory %s: %w", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("failed to open policy file %s: %w", path, err)
	}
	defer f.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("failed to read policy file %s: %w", path, err)
	}
	content := string(data)
	for _, l := range strings.Split(content, "\n") {
		if strings.TrimSuffix(l, "\r") == line {
			return nil
		}
	}
	if content != "" && !strings.HasSuffix(content, "\n") {
		line = "\n" + line
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		return fmt.Errorf("failed to write to policy file %s: %w", path, err)
	}
	return nil
}

// jsonString quotes s as serde_json does (no HTML escaping).
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}
