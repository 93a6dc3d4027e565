package policy_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
)

var (
	untrusted   = policy.ApprovalPolicy{Mode: policy.Untrusted}
	onFailure   = policy.ApprovalPolicy{Mode: policy.OnFailure}
	onRequest   = policy.ApprovalPolicy{Mode: policy.OnRequest}
	never       = policy.ApprovalPolicy{Mode: policy.Never}
	granularAll = policy.ApprovalPolicy{Mode: policy.Granular, Granular: policy.GranularApproval{
		SandboxApproval: true, Rules: true, SkillApproval: true, RequestPermissions: true, McpElicitations: true}}
	granularNone = policy.ApprovalPolicy{Mode: policy.Granular}

	readOnly  = policy.SandboxPolicy{Kind: policy.ReadOnly}
	workspace = policy.SandboxPolicy{Kind: policy.WorkspaceWrite}
	fullAcc   = policy.SandboxPolicy{Kind: policy.DangerFullAccess}
	external  = policy.SandboxPolicy{Kind: policy.ExternalSandbox}

	sandboxes = []policy.SandboxPolicy{readOnly, workspace, fullAcc, external}
	escalated = policy.Escalation{Permissions: policy.RequireEscalated}
)

const (
	A = policy.Allow
	P = policy.Prompt
	F = policy.Forbidden
)

// TestUnmatchedDecisionMatrix pins the heuristic for every approval policy ×
// sandbox × command class × escalation (docs/tools.md §4.4 table). Columns are
// read-only, workspace-write, danger-full-access, external sandbox.
func TestUnmatchedDecisionMatrix(t *testing.T) {
	policies := []struct {
		name string
		p    policy.ApprovalPolicy
		// other command, default permissions / escalated; dangerous command
		other, otherEsc, dangerous [4]policy.Decision
	}{
		{"untrusted", untrusted, [4]policy.Decision{P, P, P, P}, [4]policy.Decision{P, P, P, P}, [4]policy.Decision{P, P, P, P}},
		{"on-failure", onFailure, [4]policy.Decision{A, A, A, A}, [4]policy.Decision{A, A, A, A}, [4]policy.Decision{P, P, P, P}},
		{"on-request", onRequest, [4]policy.Decision{A, A, A, A}, [4]policy.Decision{P, P, A, A}, [4]policy.Decision{P, P, P, P}},
		{"never", never, [4]policy.Decision{A, A, A, A}, [4]policy.Decision{A, A, A, A}, [4]policy.Decision{F, F, F, F}},
		{"granular", granularAll, [4]policy.Decision{A, A, A, A}, [4]policy.Decision{P, P, A, A}, [4]policy.Decision{P, P, P, P}},
		{"granular-none", granularNone, [4]policy.Decision{A, A, A, A}, [4]policy.Decision{P, P, A, A}, [4]policy.Decision{P, P, P, P}},
	}
	safe := argv("ls -la")
	other := argv("cargo build")
	dangerous := argv("rm -rf target")
	additional := policy.Escalation{Permissions: policy.WithAdditionalPermissions}
	for _, pc := range policies {
		for i, sb := range sandboxes {
			name := fmt.Sprintf("%s/%s", pc.name, sb.Mode())
			for _, esc := range []policy.Escalation{{}, escalated} {
				assert.Equal(t, pc.dangerous[i], policy.UnmatchedDecision(dangerous, pc.p, sb, esc), "%s dangerous %v", name, esc)
			}
			assert.Equal(t, A, policy.UnmatchedDecision(safe, pc.p, sb, policy.Escalation{}), name+" known safe")
			// Leaving a restricted sandbox is never "safe": the escalated
			// known-safe command is judged like any other escalated one.
			// Under full access there is no sandbox to leave.
			safeEsc := pc.otherEsc[i]
			if sb.HasFullDiskWriteAccess() {
				safeEsc = A
			}
			assert.Equal(t, safeEsc, policy.UnmatchedDecision(safe, pc.p, sb, escalated), name+" known safe escalated")
			assert.Equal(t, safeEsc, policy.UnmatchedDecision(safe, pc.p, sb, additional), name+" known safe with additional permissions")
			assert.Equal(t, pc.other[i], policy.UnmatchedDecision(other, pc.p, sb, policy.Escalation{}), name+" other")
			assert.Equal(t, pc.otherEsc[i], policy.UnmatchedDecision(other, pc.p, sb, escalated), name+" other escalated")
			assert.Equal(t, pc.otherEsc[i], policy.UnmatchedDecision(other, pc.p, sb, additional), name+" other with additional permissions")
		}
	}
}

// TestDefaultRequirementMatrix pins the requirement of tools without their
// own (docs/tools.md §4.3).
func TestDefaultRequirementMatrix(t *testing.T) {
	const (
		S = policy.RequirementSkip
		N = policy.RequirementNeedsApproval
		X = policy.RequirementForbidden
	)
	cases := []struct {
		name string
		p    policy.ApprovalPolicy
		want [4]policy.RequirementKind
	}{
		{"never", never, [4]policy.RequirementKind{S, S, S, S}},
		{"on-failure", onFailure, [4]policy.RequirementKind{S, S, S, S}},
		{"on-request", onRequest, [4]policy.RequirementKind{N, N, S, S}},
		{"granular", granularAll, [4]policy.RequirementKind{N, N, S, S}},
		{"granular-none", granularNone, [4]policy.RequirementKind{X, X, S, S}},
		{"untrusted", untrusted, [4]policy.RequirementKind{N, N, N, N}},
	}
	for _, c := range cases {
		for i, sb := range sandboxes {
			r := policy.DefaultRequirement(c.p, sb)
			assert.Equal(t, c.want[i], r.Kind, "%s/%s", c.name, sb.Mode())
			assert.False(t, r.BypassSandbox)
			if r.Kind == X {
				assert.Equal(t, "rejected: the approval policy allows no request to leave the sandbox", r.Reason)
			}
		}
	}
}

func TestExecRequirement(t *testing.T) {
	rules := mustRules(t, `
prefix_rule(pattern=["git", "push"], decision="forbidden")
prefix_rule(pattern=["git", "push", "--force"], decision="forbidden", justification="never force-push")
prefix_rule(pattern=["git", "fetch"], decision="prompt", justification="uses the network")
prefix_rule(pattern=["npm", "install"], decision="prompt")
prefix_rule(pattern=["git", "status"])
prefix_rule(pattern=["curl"], decision="forbidden", justification="use the fetch tool")
prefix_rule(pattern=["curl", "-s"], decision="forbidden", justification="silent curl is banned")
`)
	prefix := func(p ...string) policy.Escalation { return policy.Escalation{PrefixRule: p} }
	escPrefix := func(p ...string) policy.Escalation {
		return policy.Escalation{Permissions: policy.RequireEscalated, PrefixRule: p}
	}
	cases := []struct {
		name     string
		cmd      []string
		approval policy.ApprovalPolicy
		sandbox  policy.SandboxPolicy
		esc      policy.Escalation
		want     policy.Requirement
	}{
		{"known safe skips and proposes itself for a later retry", argv("ls"), untrusted, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementSkip, ProposedAmendment: argv("ls")}},
		{"untrusted asks with the command as amendment", argv("cargo build"), untrusted, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementNeedsApproval, ProposedAmendment: argv("cargo build")}},
		{"dangerous under never is blocked", argv("rm -rf x"), never, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementForbidden, Reason: "`rm -rf x` rejected: blocked by policy"}},
		{"dangerous under on-request asks", argv("rm -rf x"), onRequest, fullAcc, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementNeedsApproval, ProposedAmendment: argv("rm -rf x")}},
		{"forbidden rule without justification", argv("git push origin"), onRequest, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementForbidden, Reason: "`git push origin` rejected: policy forbids commands starting with `git push`"}},
		{"most specific forbidden rule wins", argv("git push --force origin"), onRequest, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementForbidden, Reason: "`git push --force origin` rejected: never force-push"}},
		{"most specific forbidden justification", argv("curl -s x"), onRequest, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementForbidden, Reason: "`curl -s x` rejected: silent curl is banned"}},
		{"forbidden rule quotes the whole shell invocation", lc("ls && git push"), onRequest, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementForbidden, Reason: "`bash -lc 'ls && git push'` rejected: policy forbids commands starting with `git push`"}},
		{"forbidden beats allow", lc("git status && git push"), onRequest, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementForbidden, Reason: "`bash -lc 'git status && git push'` rejected: policy forbids commands starting with `git push`"}},
		{"prompt rule with justification", argv("git fetch origin"), onRequest, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementNeedsApproval, Reason: "`git fetch origin` requires approval: uses the network"}},
		{"prompt rule without justification", argv("npm install left-pad"), onFailure, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementNeedsApproval, Reason: "`npm install left-pad` requires approval by policy"}},
		{"prompt rule under never", argv("git fetch"), never, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementForbidden, Reason: "rejected: the command needs approval, and the approval policy is never"}},
		{"prompt rule under granular without rules", argv("git fetch"), granularNone, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementForbidden, Reason: "rejected: an exec-policy rule asks for approval, and the granular approval policy allows no rule approvals"}},
		{"prompt rule under granular with rules only", argv("git fetch"), policy.ApprovalPolicy{Mode: policy.Granular, Granular: policy.GranularApproval{Rules: true}}, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementNeedsApproval, Reason: "`git fetch` requires approval: uses the network"}},
		{"escalation prompt under granular without sandbox approval", argv("cargo build"), policy.ApprovalPolicy{Mode: policy.Granular, Granular: policy.GranularApproval{Rules: true}}, workspace, escalated,
			policy.Requirement{Kind: policy.RequirementForbidden, Reason: "rejected: the command needs approval to leave the sandbox, and the granular approval policy allows no sandbox approvals"}},
		{"heuristic prompt under on-failure for dangerous", argv("git reset --hard"), onFailure, readOnly, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementNeedsApproval, ProposedAmendment: argv("git reset --hard")}},
		{"allow rule bypasses the sandbox", argv("git status -s"), untrusted, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementSkip, BypassSandbox: true}},
		{"allow rule for only some commands does not bypass", lc("git status && ls"), untrusted, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementSkip}},
		{"a heuristic prompt in a script", lc("git status && cargo build"), untrusted, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementNeedsApproval, ProposedAmendment: argv("cargo build")}},
		{"a rule prompt suppresses the heuristic amendment", lc("git fetch && cargo build"), untrusted, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementNeedsApproval, Reason: "`bash -lc 'git fetch && cargo build'` requires approval: uses the network"}},
		{"an unsplittable script is one command", lc("cargo build > log"), untrusted, workspace, policy.Escalation{},
			policy.Requirement{Kind: policy.RequirementNeedsApproval, ProposedAmendment: lc("cargo build > log")}},
		{"model prefix_rule is proposed", argv("cargo build --release"), onRequest, workspace, escPrefix("cargo", "build"),
			policy.Requirement{Kind: policy.RequirementNeedsApproval, ProposedAmendment: argv("cargo build")}},
		{"banned prefix_rule falls back to the command", argv("python3 -c print(1)"), onRequest, workspace, escPrefix("python3"),
			policy.Requirement{Kind: policy.RequirementNeedsApproval, ProposedAmendment: argv("python3 -c print(1)")}},
		{"banned two-word prefix", lc("echo hi > x"), untrusted, workspace, prefix("bash", "-lc"),
			policy.Requirement{Kind: policy.RequirementNeedsApproval, ProposedAmendment: lc("echo hi > x")}},
		{"prefix_rule that does not cover the command", argv("cargo build"), untrusted, workspace, prefix("cargo", "test"),
			policy.Requirement{Kind: policy.RequirementNeedsApproval, ProposedAmendment: argv("cargo build")}},
		{"prefix_rule must cover every command of a script", lc("cargo build && make"), untrusted, workspace, prefix("cargo"),
			policy.Requirement{Kind: policy.RequirementNeedsApproval, ProposedAmendment: argv("cargo build")}},
		{"prefix_rule covering every command", lc("cargo build && cargo test"), untrusted, workspace, prefix("cargo"),
			policy.Requirement{Kind: policy.RequirementNeedsApproval, ProposedAmendment: argv("cargo")}},
		{"prefix_rule is ignored when a rule matched", argv("npm install x"), onRequest, workspace, prefix("npm"),
			policy.Requirement{Kind: policy.RequirementNeedsApproval, Reason: "`npm install x` requires approval by policy"}},
		{"escalation in full access runs", argv("cargo build"), onRequest, fullAcc, escalated,
			policy.Requirement{Kind: policy.RequirementSkip, ProposedAmendment: argv("cargo build")}},
	}
	for _, c := range cases {
		got := policy.ExecRequirement(c.cmd, c.approval, c.sandbox, c.esc, rules)
		got.MatchedRule = nil // TestExecRequirementMatchedRule
		assert.Equal(t, c.want, got, c.name)
	}
}

// The requirement names the rule that decided, the most specific with
// its verdict; none when the heuristic decided.
func TestExecRequirementMatchedRule(t *testing.T) {
	rules := mustRules(t, `
prefix_rule(pattern=["git"], decision="allow")
prefix_rule(pattern=["git", "push"], decision="forbidden")
prefix_rule(pattern=["git", "fetch"], decision="prompt")
`)
	for _, c := range []struct {
		cmd  []string
		want []string
	}{
		{argv("git push origin"), argv("git push")},
		{argv("git fetch"), argv("git fetch")},
		{argv("git status"), argv("git")},
		{argv("cargo build"), nil},
	} {
		r := policy.ExecRequirement(c.cmd, untrusted, workspace, policy.Escalation{}, rules)
		assert.Equal(t, c.want, r.MatchedRule, "%v", c.cmd)
	}
}

func TestExecRequirementSessionRules(t *testing.T) {
	session := policy.NewSessionApprovals()
	require.NoError(t, session.AddAllowPrefix(argv("cargo build")))
	r := policy.ExecRequirement(argv("cargo build --release"), untrusted, workspace, policy.Escalation{}, nil, session.Rules())
	assert.Equal(t, policy.Requirement{Kind: policy.RequirementSkip, BypassSandbox: true, MatchedRule: argv("cargo build")}, r)
	// A forbidding loaded rule still wins over a learned allow.
	loaded := mustRules(t, `prefix_rule(pattern=["cargo"], decision="forbidden")`)
	r = policy.ExecRequirement(argv("cargo build"), untrusted, workspace, policy.Escalation{}, loaded, session.Rules())
	assert.Equal(t, policy.RequirementForbidden, r.Kind)
}

func TestEscalationFromArgs(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		sp   string
		with *bool
		want policy.SandboxPermissions
	}{
		{"", nil, policy.UseDefault},
		{"use_default", nil, policy.UseDefault},
		{"require_escalated", nil, policy.RequireEscalated},
		{"with_additional_permissions", nil, policy.WithAdditionalPermissions},
		{"", &yes, policy.RequireEscalated},
		{"", &no, policy.UseDefault},
		{"use_default", &yes, policy.UseDefault},
	}
	for _, c := range cases {
		e, err := policy.EscalationFromArgs(c.sp, c.with, "why?", []string{"a"})
		require.NoError(t, err)
		assert.Equal(t, c.want, e.Permissions, "%q %v", c.sp, c.with)
		assert.Equal(t, c.want == policy.RequireEscalated, e.RequiresEscalated())
		assert.Equal(t, "why?", e.Justification)
		assert.Equal(t, []string{"a"}, e.PrefixRule)
		if c.sp != "" {
			assert.Equal(t, c.sp, e.Permissions.String())
		}
	}
	_, err := policy.EscalationFromArgs("sudo", nil, "", nil)
	assert.Error(t, err)
}

func TestBannedPrefixSuggestions(t *testing.T) {
	for _, b := range [][]string{{"python3"}, {"bash", "-lc"}, {"/bin/bash", "-lc"}, {"env"}, {"sudo"}, {"git"}, {"node", "-e"}, {"osascript"}} {
		assert.True(t, policy.IsBannedPrefixSuggestion(b), "%q", b)
	}
	for _, ok := range [][]string{{"git", "status"}, {"python3", "script.py"}, {"cargo"}, {}} {
		assert.False(t, policy.IsBannedPrefixSuggestion(ok), "%q", ok)
	}
}
