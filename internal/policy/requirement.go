package policy

import (
	"fmt"
	"slices"
)

// SandboxPermissions is what the model asked for with sandbox_permissions
// (docs/tools.md §4.7).
type SandboxPermissions int

// The sandbox permission requests.
const (
	// UseDefault runs under the turn's sandbox ("use_default", the default).
	UseDefault SandboxPermissions = iota
	// RequireEscalated asks to run outside the sandbox ("require_escalated").
	RequireEscalated
	// WithAdditionalPermissions asks for extra sandbox permissions
	// ("with_additional_permissions", current Codex); it prompts like an
	// escalation but does not drop the sandbox.
	WithAdditionalPermissions
)

// ParseSandboxPermissions parses the snake_case wire value; "" is UseDefault.
func ParseSandboxPermissions(s string) (SandboxPermissions, error) {
	switch s {
	case "", "use_default":
		return UseDefault, nil
	case "require_escalated":
		return RequireEscalated, nil
	case "with_additional_permissions":
		return WithAdditionalPermissions, nil
	}
	return 0, fmt.Errorf("unknown variant `%s`, expected one of `use_default`, `require_escalated`, `with_additional_permissions`", s)
}

// String returns the wire value.
func (sp SandboxPermissions) String() string {
	switch sp {
	case RequireEscalated:
		return "require_escalated"
	case WithAdditionalPermissions:
		return "with_additional_permissions"
	default:
		return "use_default"
	}
}

// Escalation is what the model sent with a command to ask for more than the
// sandbox allows.
type Escalation struct {
	// Permissions is sandbox_permissions (or the legacy
	// with_escalated_permissions flag).
	Permissions SandboxPermissions
	// Justification is the model's question for the user.
	Justification string
	// PrefixRule is the model's suggested "always allow" prefix.
	PrefixRule []string
}

// The descriptions of the escalation parameters (sandbox_permissions,
// justification, prefix_rule) that every command tool offers the model.
const (
	// SandboxPermissionsDescription describes sandbox_permissions.
	SandboxPermissionsDescription = "Sandbox for this command alone. `use_default` (the default) keeps the turn's sandbox; `require_escalated` asks the user to let it run outside the sandbox."
	// JustificationDescription describes justification.
	JustificationDescription = "Only with `require_escalated`: the short question the user is shown when asked to approve the command."
	// PrefixRuleDescription describes prefix_rule.
	PrefixRuleDescription = "Only with `sandbox_permissions: \"require_escalated\"`: the leading words of the command that the user may approve once for every later command starting with them, such as [\"npm\", \"test\"]."
)

// EscalationFromArgs builds an Escalation from the tool-call fields:
// sandbox_permissions (current) wins over with_escalated_permissions (older
// models; true means require_escalated).
func EscalationFromArgs(sandboxPermissions string, withEscalatedPermissions *bool, justification string, prefixRule []string) (Escalation, error) {
	sp, err := ParseSandboxPermissions(sandboxPermissions)
	if err != nil {
		return Escalation{}, err
	}
	if sandboxPermissions == "" && withEscalatedPermissions != nil && *withEscalatedPermissions {
		sp = RequireEscalated
	}
	return Escalation{Permissions: sp, Justification: justification, PrefixRule: slices.Clone(prefixRule)}, nil
}

// RequiresEscalated reports whether the model asked to leave the sandbox.
func (e Escalation) RequiresEscalated() bool { return e.Permissions == RequireEscalated }

// requestsOverride reports whether the model asked for anything beyond the
// default sandbox.
func (e Escalation) requestsOverride() bool { return e.Permissions != UseDefault }

// RequirementKind is the kind of an approval requirement.
type RequirementKind int

// The requirement kinds (Codex ExecApprovalRequirement).
const (
	// RequirementSkip runs without asking.
	RequirementSkip RequirementKind = iota
	// RequirementNeedsApproval asks the user first.
	RequirementNeedsApproval
	// RequirementForbidden refuses with a reason for the model.
	RequirementForbidden
)

// Requirement is the per-call approval requirement (docs/tools.md §4.3).
type Requirement struct {
	// Kind selects skip / needs approval / forbidden.
	Kind RequirementKind
	// BypassSandbox (Skip) is true when an exec-policy rule, not the
	// heuristic, allowed every command.
	BypassSandbox bool
	// Reason is the rejection text (Forbidden), or the rule-caused approval
	// reason (NeedsApproval; empty when the heuristic asked).
	Reason string
	// ProposedAmendment is the prefix an "always allow" would add: for
	// NeedsApproval the approval request carries it; for Skip it is offered
	// when a sandbox denial leads to a retry prompt.
	ProposedAmendment []string
	// MatchedRule is the argv prefix of the exec-policy rule that decided
	// (the most specific with the verdict), nil when the heuristic did:
	// the audit log's record of the decision path.
	MatchedRule []string
}

// The rejection texts the model receives (docs/tools.md §3.5).
const (
	// ReasonPromptUnderNever rejects a prompt-level decision under "never".
	ReasonPromptUnderNever = "rejected: the command needs approval, and the approval policy is never"
	// ReasonGranularSandboxRejected rejects a sandbox prompt under a granular
	// policy without sandbox_approval.
	ReasonGranularSandboxRejected = "rejected: the command needs approval to leave the sandbox, and the granular approval policy allows no sandbox approvals"
	// ReasonGranularRulesRejected rejects a rule prompt under a granular
	// policy without rules.
	ReasonGranularRulesRejected = "rejected: an exec-policy rule asks for approval, and the granular approval policy allows no rule approvals"
	// ReasonDefaultSandboxPromptDisallowed is the default requirement's
	// rejection under a granular policy without sandbox_approval.
	ReasonDefaultSandboxPromptDisallowed = "rejected: the approval policy allows no request to leave the sandbox"
	// ExecRejectedByUser answers the model when the user declines a command.
	ExecRejectedByUser = "exec command rejected by user"
	// PatchRejectedByUser answers the model when the user declines a patch.
	PatchRejectedByUser = "patch rejected by user"
	// RetryWithoutSandboxReason is the approval reason of a retry prompt
	// after a sandbox denial.
	RetryWithoutSandboxReason = "command failed; retry without sandbox?"
)

// DefaultRequirement is the requirement of a tool that has none of its own:
// never and on-failure skip; on-request and granular ask only when the file
// system is restricted (granular without sandbox_approval forbids instead);
// untrusted always asks.
func DefaultRequirement(approval ApprovalPolicy, sandbox SandboxPolicy) Requirement {
	var ask bool
	switch approval.Mode {
	case Never, OnFailure:
		ask = false
	case OnRequest, Granular:
		ask = sandbox.IsRestricted()
	case Untrusted:
		ask = true
	}
	switch {
	case ask && approval.Mode == Granular && !approval.Granular.SandboxApproval:
		return Requirement{Kind: RequirementForbidden, Reason: ReasonDefaultSandboxPromptDisallowed}
	case ask:
		return Requirement{Kind: RequirementNeedsApproval}
	}
	return Requirement{Kind: RequirementSkip}
}

// UnmatchedDecision is the heuristic verdict for a command no exec-policy
// rule matches (docs/tools.md §4.4): known safe → allow, unless the model asked
// to leave (or widen) a restricted sandbox; dangerous → prompt (forbidden
// under never); never / on-failure → allow; untrusted → prompt; on-request /
// granular → allow under full access, and in a restricted sandbox prompt
// only when the model asked for more than the sandbox.
//
// A known-safe command is safe only inside the sandbox: `git status` runs
// whatever core.fsmonitor a sandboxed command planted in the repository, so
// an escalation request always reaches the user.
func UnmatchedDecision(cmd []string, approval ApprovalPolicy, sandbox SandboxPolicy, esc Escalation) Decision {
	if IsKnownSafe(cmd) && (!esc.requestsOverride() || sandbox.HasFullDiskWriteAccess()) {
		return Allow
	}
	if MightBeDangerous(cmd) {
		if approval.Mode == Never {
			return Forbidden
		}
		return Prompt
	}
	switch approval.Mode {
	case Never, OnFailure:
		return Allow
	case Untrusted:
		return Prompt
	}
	if sandbox.HasFullDiskWriteAccess() || !esc.requestsOverride() {
		return Allow
	}
	return Prompt
}

// CommandsForPolicy returns the commands exec policy evaluates for argv: the
// split commands of a plain `bash -lc` script, else argv itself.
func CommandsForPolicy(argv []string) [][]string {
	if cmds, ok := ShellPlainCommands(argv); ok && len(cmds) > 0 {
		return cmds
	}
	return [][]string{slices.Clone(argv)}
}

// ExecRequirement computes the approval requirement of a command from the
// exec-policy rules (any number of sets, e.g. the loaded rules and a
// session's learned amendments) and the unmatched-command heuristic
// (docs/tools.md §4.4, Codex create_exec_approval_requirement_for_command).
func ExecRequirement(argv []string, approval ApprovalPolicy, sandbox SandboxPolicy, esc Escalation, rules ...*RuleSet) Requirement {
	commands := CommandsForPolicy(argv)
	fallback := func(c []string) Decision { return UnmatchedDecision(c, approval, sandbox, esc) }
	ev := Check(rules, commands, fallback)
	decided, _ := mostSpecific(ev, ev.Decision)
	rule := decided.MatchedPrefix
	switch ev.Decision {
	case Forbidden:
		return Requirement{Kind: RequirementForbidden, Reason: forbiddenReason(argv, ev), MatchedRule: rule}
	case Prompt:
		ruleCaused := slices.ContainsFunc(ev.Matches, func(m Match) bool { return m.Kind == RuleMatch && m.Decision == Prompt })
		if reason, rejected := promptRejected(approval, ruleCaused); rejected {
			return Requirement{Kind: RequirementForbidden, Reason: reason, MatchedRule: rule}
		}
		amend := requestedAmendment(esc.PrefixRule, ev, rules, commands, fallback)
		if amend == nil {
			amend = promptAmendment(ev)
		}
		return Requirement{Kind: RequirementNeedsApproval, Reason: promptReason(argv, ev), ProposedAmendment: amend, MatchedRule: rule}
	}
	bypass := true
	for _, c := range commands {
		if !slices.ContainsFunc(matchesFor(rules, c), func(m Match) bool { return m.Decision == Allow }) {
			bypass = false
			break
		}
	}
	return Requirement{Kind: RequirementSkip, BypassSandbox: bypass, ProposedAmendment: allowAmendment(ev), MatchedRule: rule}
}

// promptRejected says whether the approval policy turns a prompt into a
// rejection, and with which text.
func promptRejected(approval ApprovalPolicy, ruleCaused bool) (string, bool) {
	switch approval.Mode {
	case Never:
		return ReasonPromptUnderNever, true
	case Granular:
		if ruleCaused {
			if !approval.Granular.Rules {
				return ReasonGranularRulesRejected, true
			}
		} else if !approval.Granular.SandboxApproval {
			return ReasonGranularSandboxRejected, true
		}
	}
	return "", false
}

// mostSpecific returns the rule match with the longest prefix among those
// with decision d (the first on ties).
func mostSpecific(ev Evaluation, d Decision) (Match, bool) {
	var best Match
	found := false
	for _, m := range ev.Matches {
		if m.Kind == RuleMatch && m.Decision == d && (!found || len(m.MatchedPrefix) > len(best.MatchedPrefix)) {
			best, found = m, true
		}
	}
	return best, found
}

// forbiddenReason words a Forbidden verdict the way the reference does.
func forbiddenReason(argv []string, ev Evaluation) string {
	cmd := ShellJoin(argv)
	m, ok := mostSpecific(ev, Forbidden)
	switch {
	case ok && m.Justification != "":
		return fmt.Sprintf("`%s` rejected: %s", cmd, m.Justification)
	case ok:
		return fmt.Sprintf("`%s` rejected: policy forbids commands starting with `%s`", cmd, ShellJoin(m.MatchedPrefix))
	}
	return fmt.Sprintf("`%s` rejected: blocked by policy", cmd)
}

// promptReason words a rule-caused prompt; empty when the heuristic asked.
func promptReason(argv []string, ev Evaluation) string {
	m, ok := mostSpecific(ev, Prompt)
	switch {
	case ok && m.Justification != "":
		return fmt.Sprintf("`%s` requires approval: %s", ShellJoin(argv), m.Justification)
	case ok:
		return fmt.Sprintf("`%s` requires approval by policy", ShellJoin(argv))
	}
	return ""
}

// promptAmendment proposes the first heuristic-prompted command, unless a
// rule prompted (allowing one command would not skip that rule).
func promptAmendment(ev Evaluation) []string {
	for _, m := range ev.Matches {
		if m.Kind == RuleMatch && m.Decision == Prompt {
			return nil
		}
	}
	for _, m := range ev.Matches {
		if m.Kind == HeuristicMatch && m.Decision == Prompt {
			return slices.Clone(m.Command)
		}
	}
	return nil
}

// allowAmendment proposes the first heuristic-allowed command for a later
// run outside the sandbox, unless any rule matched.
func allowAmendment(ev Evaluation) []string {
	if ev.HasRuleMatch() {
		return nil
	}
	for _, m := range ev.Matches {
		if m.Kind == HeuristicMatch && m.Decision == Allow {
			return slices.Clone(m.Command)
		}
	}
	return nil
}

// bannedPrefixSuggestions are prefixes the model may not get approved as
// "always allow": interpreters, shells and wrappers that would allow anything.
var bannedPrefixSuggestions = [][]string{
	{"python3"}, {"python3", "-"}, {"python3", "-c"}, {"python"}, {"python", "-"}, {"python", "-c"},
	{"py"}, {"py", "-3"}, {"pythonw"}, {"pyw"}, {"pypy"}, {"pypy3"}, {"git"},
	{"bash"}, {"bash", "-lc"}, {"sh"}, {"sh", "-c"}, {"sh", "-lc"}, {"zsh"}, {"zsh", "-lc"},
	{"/bin/zsh"}, {"/bin/zsh", "-lc"}, {"/bin/bash"}, {"/bin/bash", "-lc"},
	{"pwsh"}, {"pwsh", "-Command"}, {"pwsh", "-c"}, {"powershell"}, {"powershell", "-Command"}, {"powershell", "-c"},
	{"powershell.exe"}, {"powershell.exe", "-Command"}, {"powershell.exe", "-c"},
	{"env"}, {"sudo"}, {"node"}, {"node", "-e"}, {"perl"}, {"perl", "-e"}, {"ruby"}, {"ruby", "-e"},
	{"php"}, {"php", "-r"}, {"lua"}, {"lua", "-e"}, {"osascript"},
}

// IsBannedPrefixSuggestion reports whether prefix is too broad to propose
// as an "always allow" rule.
func IsBannedPrefixSuggestion(prefix []string) bool {
	return slices.ContainsFunc(bannedPrefixSuggestions, func(b []string) bool { return slices.Equal(b, prefix) })
}

// requestedAmendment returns the model's prefix_rule as the proposal when it
// is non-empty, not banned, no rule matched, and allowing it would let every
// command of the call run.
func requestedAmendment(prefix []string, ev Evaluation, rules []*RuleSet, commands [][]string, fallback Fallback) []string {
	if len(prefix) == 0 || IsBannedPrefixSuggestion(prefix) || ev.HasRuleMatch() {
		return nil
	}
	extra := NewRuleSet()
	if err := extra.AddPrefixRule(prefix, Allow); err != nil {
		return nil
	}
	with := append(slices.Clone(rules), extra)
	for _, c := range commands {
		if Check(with, [][]string{c}, fallback).Decision != Allow {
			return nil
		}
	}
	return slices.Clone(prefix)
}

// EscalationRejection is the answer the model gets when it asks for
// escalated permissions although the approval policy is not on-request.
func EscalationRejection(approval ApprovalPolicy) string {
	return fmt.Sprintf("command rejected: running outside the sandbox can be asked for only under the on-request approval policy, and this turn's is %s; run the command without sandbox_permissions", approval)
}
