package config

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/appserver/appserver/internal/apperr"
)

// Author is who writes a user config: the operator's client (the zero
// value) or a named principal, held to its ceiling.
type Author struct {
	// Principal names the principal; "" is the operator's client (the
	// websocket's own credentials, or local trust without auth).
	Principal string
	// Ceiling bounds the approval policy and sandbox mode the author may
	// write; the zero value bounds nothing.
	Ceiling Ceiling
}

// Ceiling bounds the sandbox mode and approval policy a principal may
// choose. The zero value bounds nothing.
type Ceiling struct {
	// MaxSandbox is the most permissive sandbox mode; "" is no bound.
	MaxSandbox SandboxMode
	// MaxApproval is the least asking approval policy (untrusted <
	// on-request < on-failure < never); "" is no bound.
	MaxApproval ApprovalPolicy
}

// AuthorFor returns the author of principal's writes under this
// configuration: the operator's client for "", else the principal with
// the ceiling of [http_api] (principal_max_sandbox, principal_max_approval).
func (c *Config) AuthorFor(principal string) Author {
	if principal == "" {
		return Author{}
	}
	maxApproval := c.HTTPAPI.PrincipalMaxApproval
	if maxApproval == "" {
		maxApproval = ApprovalNever
	}
	return Author{Principal: principal, Ceiling: Ceiling{MaxSandbox: c.HTTPAPI.PrincipalMaxSandbox, MaxApproval: maxApproval}}
}

// EditReason says why a client's config edit was refused.
type EditReason string

// The reasons of an EditError.
const (
	// EditOperatorKey: the key is one only the server's operator sets.
	EditOperatorKey EditReason = "operator"
	// EditUnknownKey: the key is not a configuration key at all.
	EditUnknownKey EditReason = "unknown"
	// EditInvalid: the key path or the value is invalid.
	EditInvalid EditReason = "invalid"
)

// EditError is a client's config edit refused by the allow-list of
// clientKeys. It wraps an apperr.Invalid error whose message names the key.
type EditError struct {
	// Key is the dotted key refused.
	Key string
	// Reason says why.
	Reason EditReason
	err    *apperr.Error
}

// Error returns the message naming the key.
func (e *EditError) Error() string { return e.err.Error() }

// Unwrap returns the apperr.Invalid error.
func (e *EditError) Unwrap() error { return e.err }

func editError(path []string, reason EditReason, format string, args ...any) *EditError {
	k := formatKey(path)
	// Plain quotes rather than %q: k may hold quoted segments.
	return &EditError{Key: k, Reason: reason, err: apperr.New(apperr.Invalid, "Invalid request: config key \"%s\": %s", k, fmt.Sprintf(format, args...))}
}

// clientKey is one setting clients may write to a user config, with the
// check of its value. These are per-user choices: the model and how it
// reasons, how much the user is asked, and the client's own preferences.
// Everything else (listeners, storage, authentication, principals and
// their ceilings, model providers, MCP servers, telemetry, the sandbox
// backend, the cluster, retention...) is the operator's and only the
// operator's files, environment and command line set it.
type clientKey struct {
	// path is the dotted key; a "*" segment matches any one name (a
	// profile, a project, a feature), and a last segment "**" matches the
	// table at its parent and anything under it.
	path string
	// check validates a value written at path (a leaf: never a table,
	// unless the key ends in "**"); nil marks a key a wildcard would
	// match that stays the operator's.
	check func(v any, x editContext) error
}

// editContext is what a value is checked against: the operator's
// configuration (without any user config) and the writer.
type editContext struct {
	base *Config
	who  Author
}

// profileKeys are the keys clients may write at the top level and inside
// a [profiles.<name>] table: the model and how it reasons, and how much
// the user is asked.
var profileKeys = []clientKey{
	{"model", checkModel},
	{"model_provider", checkProvider},
	{"model_reasoning_effort", oneOf(effortNames...)},
	{"plan_mode_reasoning_effort", oneOf(effortNames...)},
	{"model_reasoning_summary", oneOf("auto", "concise", "detailed", "none")},
	{"model_verbosity", oneOf("low", "medium", "high")},
	{"service_tier", checkToken},
	{"personality", oneOf("none", "friendly", "pragmatic")},
	{"approvals_reviewer", oneOf("user", "auto_review", "guardian_subagent")},
	{"approval_policy", checkApproval},
	{"sandbox_mode", checkSandbox},
}

// clientKeys is the allow-list of keys clients may write (see clientKey):
// profileKeys, at the top level and in every profile, and these.
var clientKeys = append(withProfiles(profileKeys), []clientKey{
	// The TUI's display preferences; appserver does not read them.
	{"hide_agent_reasoning", checkBool},
	{"show_raw_agent_reasoning", checkBool},
	{"tui.**", checkFreeform},
	// Dismissed notices: flags, and the model migrations acknowledged
	// (from → to).
	{"notice.*", checkBool},
	{"notice.model_migrations.*", checkModel},
	// Codex feature switches: those of FeatureFlags choose the tools of
	// the writer's threads (none reaches further than a thread's own
	// config may); the others are kept and ignored (the TUI's /memories
	// writes two).
	{"features.*", checkBool},
	{"projects.*.trust_level", oneOf("trusted", "untrusted")},
	// The skills turned off (skills/config/write).
	{"skills.config", checkSkillSwitches},
}...)

// withProfiles returns keys followed by each of them under profiles.*.
func withProfiles(keys []clientKey) []clientKey {
	out := slices.Clone(keys)
	for _, k := range keys {
		out = append(out, clientKey{path: "profiles.*." + k.path, check: k.check})
	}
	return out
}

// effortNames are the reasoning efforts a configuration may name, from
// none to the deepest some models offer (model/list lists each model's).
var effortNames = []string{
	string(ReasoningNone), string(ReasoningMinimal), string(ReasoningLow),
	string(ReasoningMedium), string(ReasoningHigh), string(ReasoningXHigh),
	string(ReasoningMax), string(ReasoningUltra),
}

// matchKey reports whether the concrete key path matches pattern; prefix
// reports whether path is a table on the way to some key pattern matches.
func matchKey(pattern, path []string) (match, prefix bool) {
	for i, p := range pattern {
		if p == "**" {
			return len(path) >= i, false
		}
		if i == len(path) {
			return false, true
		}
		if p != "*" && p != path[i] {
			return false, false
		}
	}
	return len(path) == len(pattern), false
}

// lookupClientKey finds the allow-list entry matching path (literal
// entries win over wildcard ones: notice.model_migrations.* over notice.*)
// and reports whether path is a table on the way to some entry.
func lookupClientKey(path []string) (entry *clientKey, table bool) {
	best := -1
	for i := range clientKeys {
		pat := strings.Split(clientKeys[i].path, ".")
		m, p := matchKey(pat, path)
		table = table || p
		if m && (best < 0 || literalness(pat) > literalness(strings.Split(clientKeys[best].path, "."))) {
			best = i
		}
	}
	if best >= 0 {
		return &clientKeys[best], table
	}
	return nil, table
}

// literalness counts the literal segments of a pattern.
func literalness(pat []string) int {
	n := 0
	for _, s := range pat {
		if s != "*" && s != "**" {
			n++
		}
	}
	return n
}

// refuseKey is the error for a key path clients may not write: the
// operator's keys (appserver's and Codex's) are read-only, anything else is
// unknown.
func refuseKey(path []string) *EditError {
	if _, known := typeAt(configType, path); known || codexTopLevelKeys[path[0]] || strings.HasPrefix(path[0], "experimental_") {
		return editError(path, EditOperatorKey, "set by the server's operator; clients may not write it")
	}
	return editError(path, EditUnknownKey, "not a configuration key clients may write")
}

// checkClientTree checks v, written at path (a table or a leaf), against
// the allow-list. It returns what of v passes (nil when nothing does) and
// the problems found, in key order: keys clients may not write, and values
// their checks refuse.
func checkClientTree(path []string, v any, x editContext) (any, []*EditError) {
	entry, table := lookupClientKey(path)
	if tbl, ok := v.(map[string]any); ok && table && (entry == nil || !strings.HasSuffix(entry.path, "**")) {
		var problems []*EditError
		kept := make(map[string]any, len(tbl))
		for _, k := range sortedKeys(tbl) {
			child := append(slices.Clip(path), k)
			if err := checkSegment(k); err != nil {
				problems = append(problems, editError(child, EditInvalid, "%s", err.Error()))
				continue
			}
			cv, ps := checkClientTree(child, tbl[k], x)
			problems = append(problems, ps...)
			if cv != nil {
				kept[k] = cv
			}
		}
		if len(kept) == 0 && problems != nil {
			return nil, problems
		}
		return kept, problems
	}
	switch {
	case entry != nil && entry.check != nil:
		if err := entry.check(v, x); err != nil {
			return nil, []*EditError{editError(path, EditInvalid, "%s", err.Error())}
		}
		return v, nil
	case table:
		return nil, []*EditError{editError(path, EditInvalid, "expected a table")}
	}
	return nil, []*EditError{refuseKey(path)}
}

// FilterUserConfig keeps of tree, a user config decoded from TOML, the keys
// author may write with values that pass their checks under base (the
// configuration without any user config), and reports the others as
// warnings attributed to source: what an older build, a hand edit or a
// lower ceiling left there is never applied.
func FilterUserConfig(tree map[string]any, base *Config, who Author, source string) (map[string]any, []Warning) {
	kept := map[string]any{}
	var warnings []Warning
	x := editContext{base: base, who: who}
	for _, k := range sortedKeys(tree) {
		v, problems := checkClientTree([]string{k}, tree[k], x)
		for _, p := range problems {
			warnings = append(warnings, Warning{Path: p.Key, Source: source,
				Message: strings.TrimPrefix(apperr.MessageOf(p), "Invalid request: ") + " (ignored)"})
		}
		if v != nil {
			kept[k] = v
		}
	}
	return kept, warnings
}

// checkEdit checks one client edit against the allow-list before it is
// applied: the key must be one clients may write (or a table holding only
// such keys) and a value other than null must pass its check.
func checkEdit(path []string, value any, x editContext) error {
	for _, seg := range path {
		if err := checkSegment(seg); err != nil {
			return editError(path, EditInvalid, "%s", err.Error())
		}
	}
	if value == nil {
		if entry, table := lookupClientKey(path); !table && (entry == nil || entry.check == nil) {
			return refuseKey(path)
		}
		return nil
	}
	if _, problems := checkClientTree(path, value, x); problems != nil {
		return problems[0]
	}
	return nil
}

// checkSegment refuses key segments no client needs: empty, too long, or
// holding control characters.
func checkSegment(s string) error {
	if s == "" {
		return fmt.Errorf("empty key segment")
	}
	if len(s) > 512 {
		return fmt.Errorf("key segment longer than 512 bytes")
	}
	return cleanText(s)
}

// cleanText refuses what no setting holds: invalid UTF-8, NUL and other
// control characters.
func cleanText(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("control character %q not allowed", r)
		}
	}
	return nil
}

func checkString(v any, maxLen int) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("expected a string")
	}
	if len(s) > maxLen {
		return "", fmt.Errorf("longer than %d bytes", maxLen)
	}
	if err := cleanText(s); err != nil {
		return "", err
	}
	return s, nil
}

// checkSkillSwitches accepts [[skills.config]]: at most MaxSkillSwitches
// tables, each with exactly one of an absolute path and a name, and
// enabled.
func checkSkillSwitches(v any, _ editContext) error {
	var entries []map[string]any
	switch x := v.(type) {
	case []map[string]any:
		entries = x
	case []any:
		for _, e := range x {
			t, ok := e.(map[string]any)
			if !ok {
				return fmt.Errorf("expected an array of tables")
			}
			entries = append(entries, t)
		}
	default:
		return fmt.Errorf("expected an array of tables")
	}
	if len(entries) > MaxSkillSwitches {
		return fmt.Errorf("more than %d entries", MaxSkillSwitches)
	}
	for i, e := range entries {
		for k := range e {
			if k != "path" && k != "name" && k != "enabled" {
				return fmt.Errorf("entry %d: unknown key %q", i+1, k)
			}
		}
		path, hasPath := e["path"]
		name, hasName := e["name"]
		if hasPath == hasName {
			return fmt.Errorf("entry %d: expected exactly one of path and name", i+1)
		}
		if hasPath {
			p, err := checkString(path, 4096)
			if err != nil || !filepath.IsAbs(p) {
				return fmt.Errorf("entry %d: path must be an absolute path", i+1)
			}
		} else if n, err := checkString(name, 4096); err != nil || strings.TrimSpace(n) == "" {
			return fmt.Errorf("entry %d: name must be a non-empty string", i+1)
		}
		if err := checkBool(e["enabled"], editContext{}); err != nil {
			return fmt.Errorf("entry %d: enabled: %w", i+1, err)
		}
	}
	return nil
}

func checkBool(v any, _ editContext) error {
	if _, ok := v.(bool); !ok {
		return fmt.Errorf("expected a boolean")
	}
	return nil
}

// oneOf accepts exactly the given strings.
func oneOf(values ...string) func(any, editContext) error {
	return func(v any, _ editContext) error {
		s, ok := v.(string)
		if !ok || !slices.Contains(values, s) {
			return fmt.Errorf("expected one of %s", quoteAll(values))
		}
		return nil
	}
}

func quoteAll(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

// checkToken accepts a short lower-case identifier (a service tier name).
func checkToken(v any, _ editContext) error {
	s, err := checkString(v, 64)
	if err != nil {
		return err
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("expected a name of a-z, 0-9, '_' and '-'")
		}
	}
	if s == "" {
		return fmt.Errorf("must not be empty")
	}
	return nil
}

// checkModel accepts a model name: printable, without spaces, and one of
// the operator's [models] catalog when there is one.
func checkModel(v any, x editContext) error {
	s, err := checkString(v, 256)
	if err != nil {
		return err
	}
	if s == "" || strings.ContainsFunc(s, unicode.IsSpace) {
		return fmt.Errorf("expected a model name without spaces")
	}
	if len(x.base.ModelCatalog) > 0 && !slices.ContainsFunc(x.base.Models(), func(m ModelInfo) bool { return m.ID == s }) {
		return fmt.Errorf("model %q is not one the server offers (model/list)", s)
	}
	return nil
}

// checkProvider accepts a model provider the operator configured: the
// default one, or a [model_providers.<id>] table of the operator's layers.
func checkProvider(v any, x editContext) error {
	s, err := checkString(v, 256)
	if err != nil {
		return err
	}
	if _, ok := x.base.ModelProviders[s]; ok && (s == x.base.ModelProvider || x.base.explicit("model_providers", s)) {
		return nil
	}
	return fmt.Errorf("model provider %q is not configured by the server's operator (modelProvider/list)", s)
}

var approvalRanks = map[ApprovalPolicy]int{ApprovalUntrusted: 0, ApprovalOnRequest: 1, ApprovalOnFailure: 2, ApprovalNever: 3}

var sandboxRanks = map[SandboxMode]int{SandboxReadOnly: 0, SandboxWorkspaceWrite: 1, SandboxDangerFullAccess: 2}

// checkApproval accepts an approval policy within the author's ceiling.
func checkApproval(v any, x editContext) error {
	s, ok := v.(string)
	rank, known := approvalRanks[ApprovalPolicy(s)]
	if !ok || !known {
		return fmt.Errorf(`expected one of "untrusted", "on-request", "on-failure", "never"`)
	}
	if ceil := x.who.Ceiling.MaxApproval; ceil != "" && rank > approvalRanks[ceil] {
		return fmt.Errorf("approval policy %q is beyond this principal's ceiling %q", s, ceil)
	}
	return nil
}

// checkSandbox accepts a sandbox mode within the author's ceiling.
func checkSandbox(v any, x editContext) error {
	s, ok := v.(string)
	rank, known := sandboxRanks[SandboxMode(s)]
	if !ok || !known {
		return fmt.Errorf(`expected one of "read-only", "workspace-write", "danger-full-access"`)
	}
	if ceil := x.who.Ceiling.MaxSandbox; ceil != "" && rank > sandboxRanks[ceil] {
		return fmt.Errorf("sandbox mode %q is beyond this principal's ceiling %q", s, ceil)
	}
	return nil
}

// Bounds of the free-form client preferences (tui.**).
const (
	maxFreeformDepth = 8
	maxFreeformItems = 256
	maxFreeformText  = 1024
)

// checkFreeform accepts a client preference appserver only keeps: a
// boolean, a finite number, a clean string, an array of those or a table
// of them, within bounds.
func checkFreeform(v any, _ editContext) error {
	return freeform(v, 0)
}

func freeform(v any, depth int) error {
	if depth > maxFreeformDepth {
		return fmt.Errorf("nested deeper than %d levels", maxFreeformDepth)
	}
	switch x := v.(type) {
	case bool, int64:
		return nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("expected a finite number")
		}
		return nil
	case string:
		_, err := checkString(x, maxFreeformText)
		return err
	case []any:
		if len(x) > maxFreeformItems {
			return fmt.Errorf("more than %d items", maxFreeformItems)
		}
		for _, e := range x {
			if _, table := e.(map[string]any); table {
				return fmt.Errorf("expected an array of values, not of tables")
			}
			if err := freeform(e, depth+1); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		if len(x) > maxFreeformItems {
			return fmt.Errorf("more than %d keys", maxFreeformItems)
		}
		for k, e := range x {
			if err := checkSegment(k); err != nil {
				return err
			}
			if err := freeform(e, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("expected a boolean, number, string, array or table")
}
