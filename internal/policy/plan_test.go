package policy_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
)

func TestPlanExecEscalationGuard(t *testing.T) {
	for _, c := range []struct {
		p    policy.ApprovalPolicy
		name string
	}{
		{never, "never"},
		{untrusted, "untrusted"},
		{onFailure, "on-failure"},
		{granularAll, "granular"},
	} {
		plan := policy.PlanExec(policy.ExecRequest{Command: argv("ls"), Cwd: "/w", Approval: c.p, Sandbox: workspace, Escalation: escalated})
		assert.Equal(t, policy.ActionForbidden, plan.Action, c.name)
		assert.Equal(t, fmt.Sprintf("command rejected: running outside the sandbox can be asked for only under the on-request approval policy, and this turn's is %s; run the command without sandbox_permissions", c.name), plan.Reason)
	}
	// The legacy flag is the same request.
	yes := true
	esc, err := policy.EscalationFromArgs("", &yes, "", nil)
	require.NoError(t, err)
	plan := policy.PlanExec(policy.ExecRequest{Command: argv("ls"), Approval: never, Sandbox: workspace, Escalation: esc})
	assert.Equal(t, policy.ActionForbidden, plan.Action)
	additional := policy.Escalation{Permissions: policy.WithAdditionalPermissions}
	plan = policy.PlanExec(policy.ExecRequest{Command: argv("ls"), Approval: onFailure, Sandbox: workspace, Escalation: additional})
	assert.Equal(t, policy.ActionForbidden, plan.Action, "additional permissions are refused the same way")
	assert.Contains(t, plan.Reason, "this turn's is on-failure;")
	// Under on-request the escalation reaches the user, even for a known-safe
	// command: outside the sandbox `git status` runs a planted core.fsmonitor.
	plan = policy.PlanExec(policy.ExecRequest{Command: argv("ls"), Approval: onRequest, Sandbox: workspace, Escalation: escalated})
	assert.Equal(t, policy.ActionNeedsApproval, plan.Action, "known safe + escalation asks the user")
	assert.False(t, plan.SandboxedAfterApproval, "once approved it runs outside the sandbox")
}

// TestPlanExecMatrix covers the four actions for every approval policy ×
// sandbox for an ordinary command, with and without escalation.
func TestPlanExecMatrix(t *testing.T) {
	const (
		S = policy.ActionSkip
		U = policy.ActionRunUnsandboxed
		N = policy.ActionNeedsApproval
		X = policy.ActionForbidden
	)
	cases := []struct {
		name         string
		p            policy.ApprovalPolicy
		plain, escal [4]policy.Action
	}{
		{"untrusted", untrusted, [4]policy.Action{N, N, N, N}, [4]policy.Action{X, X, X, X}},
		{"on-failure", onFailure, [4]policy.Action{S, S, U, U}, [4]policy.Action{X, X, X, X}},
		{"on-request", onRequest, [4]policy.Action{S, S, U, U}, [4]policy.Action{N, N, U, U}},
		{"never", never, [4]policy.Action{S, S, U, U}, [4]policy.Action{X, X, X, X}},
		{"granular", granularAll, [4]policy.Action{S, S, U, U}, [4]policy.Action{X, X, X, X}},
	}
	for _, c := range cases {
		for i, sb := range sandboxes {
			plain := policy.PlanExec(policy.ExecRequest{Command: argv("cargo build"), Cwd: "/w", Approval: c.p, Sandbox: sb})
			assert.Equal(t, c.plain[i], plain.Action, "%s/%s plain", c.name, sb.Mode())
			if plain.Action == N {
				assert.Equal(t, !sb.HasFullDiskWriteAccess(), plain.SandboxedAfterApproval, "%s/%s", c.name, sb.Mode())
			}
			esc := policy.PlanExec(policy.ExecRequest{Command: argv("cargo build"), Cwd: "/w", Approval: c.p, Sandbox: sb, Escalation: escalated})
			assert.Equal(t, c.escal[i], esc.Action, "%s/%s escalated", c.name, sb.Mode())
			if esc.Action == N {
				assert.False(t, esc.SandboxedAfterApproval, "an approved escalation runs outside the sandbox")
			}
			safe := policy.PlanExec(policy.ExecRequest{Command: argv("cat README.md"), Cwd: "/w", Approval: c.p, Sandbox: sb})
			want := S
			if sb.HasFullDiskWriteAccess() {
				want = U
			}
			assert.Equal(t, want, safe.Action, "%s/%s known safe", c.name, sb.Mode())
			danger := policy.PlanExec(policy.ExecRequest{Command: argv("rm -rf build"), Cwd: "/w", Approval: c.p, Sandbox: sb})
			if c.p.Mode == policy.Never {
				assert.Equal(t, X, danger.Action)
				assert.Equal(t, "`rm -rf build` rejected: blocked by policy", danger.Reason)
			} else {
				assert.Equal(t, N, danger.Action, "%s/%s dangerous", c.name, sb.Mode())
			}
		}
	}
}

func TestPlanExecApprovalRequestFields(t *testing.T) {
	rules := mustRules(t, `prefix_rule(pattern=["git", "fetch"], decision="prompt", justification="network")
prefix_rule(pattern=["make"], decision="allow")`)
	esc := policy.Escalation{Permissions: policy.RequireEscalated, Justification: "Do you want to allow network access for the build?", PrefixRule: argv("cargo build")}
	p := policy.PlanExec(policy.ExecRequest{Command: argv("cargo build --offline"), Cwd: "/w", Approval: onRequest, Sandbox: workspace, Escalation: esc, Rules: rules})
	require.Equal(t, policy.ActionNeedsApproval, p.Action)
	assert.Equal(t, esc.Justification, p.Reason, "the model's justification is the reason when no rule asked")
	assert.Equal(t, argv("cargo build"), p.ProposedAmendment)
	assert.False(t, p.SandboxedAfterApproval)
	b, err := json.Marshal(p.AvailableDecisions)
	require.NoError(t, err)
	assert.JSONEq(t, `["accept",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["cargo","build"]}},"cancel"]`, string(b))

	// A rule's reason wins over the justification.
	p = policy.PlanExec(policy.ExecRequest{Command: argv("git fetch"), Cwd: "/w", Approval: onRequest, Sandbox: workspace, Escalation: esc, Rules: rules})
	require.Equal(t, policy.ActionNeedsApproval, p.Action)
	assert.Equal(t, "`git fetch` requires approval: network", p.Reason)
	assert.Nil(t, p.ProposedAmendment)
	b, err = json.Marshal(p.AvailableDecisions)
	require.NoError(t, err)
	assert.JSONEq(t, `["accept","cancel"]`, string(b))

	// An allow rule runs outside the sandbox without asking.
	p = policy.PlanExec(policy.ExecRequest{Command: argv("make test"), Cwd: "/w", Approval: untrusted, Sandbox: readOnly, Rules: rules})
	assert.Equal(t, policy.ActionRunUnsandboxed, p.Action)

	// Additional permissions only offer accept / cancel.
	p = policy.PlanExec(policy.ExecRequest{Command: argv("cargo build"), Cwd: "/w", Approval: onRequest, Sandbox: workspace,
		Escalation: policy.Escalation{Permissions: policy.WithAdditionalPermissions}})
	require.Equal(t, policy.ActionNeedsApproval, p.Action)
	assert.True(t, p.SandboxedAfterApproval, "additional permissions keep the sandbox")
	assert.Equal(t, []policy.ReviewDecision{{Kind: policy.Accept}, {Kind: policy.Cancel}}, p.AvailableDecisions)
}

func TestResolveDecisions(t *testing.T) {
	session := policy.NewSessionApprovals()
	req := policy.ExecRequest{Command: argv("cargo build"), Cwd: "/w", Approval: untrusted, Sandbox: workspace, Session: session}
	plan := policy.PlanExec(req)
	require.Equal(t, policy.ActionNeedsApproval, plan.Action)

	out := policy.Resolve(plan, policy.ReviewDecision{Kind: policy.Accept}, session)
	assert.Equal(t, policy.Outcome{Run: true, Sandboxed: true}, out)
	assert.Equal(t, policy.ActionNeedsApproval, policy.PlanExec(req).Action, "accept is for one run")

	out = policy.Resolve(plan, policy.ReviewDecision{Kind: policy.Decline}, session)
	assert.Equal(t, policy.Outcome{Message: "exec command rejected by user"}, out)

	out = policy.Resolve(plan, policy.ReviewDecision{Kind: policy.Cancel}, session)
	assert.Equal(t, policy.Outcome{Message: "exec command rejected by user", InterruptTurn: true}, out)

	out = policy.Resolve(plan, policy.ReviewDecision{Kind: policy.AcceptForSession}, session)
	assert.Equal(t, policy.Outcome{Run: true, Sandboxed: true}, out)
	again := policy.PlanExec(req)
	assert.Equal(t, policy.ActionSkip, again.Action, "the same command is remembered for the session")
	assert.True(t, again.PreApproved)
	other := req
	other.Cwd = "/elsewhere"
	assert.Equal(t, policy.ActionNeedsApproval, policy.PlanExec(other).Action, "another cwd is another command")
	other = req
	other.Command = argv("cargo build --release")
	assert.Equal(t, policy.ActionNeedsApproval, policy.PlanExec(other).Action, "another argv is another command")

	// An amendment allows the prefix for the session (and asks to persist it).
	amend := policy.ReviewDecision{Kind: policy.AcceptWithExecpolicyAmendment, ExecpolicyAmendment: argv("cargo test")}
	tplan := policy.PlanExec(policy.ExecRequest{Command: argv("cargo test"), Cwd: "/w", Approval: untrusted, Sandbox: workspace, Session: session})
	out = policy.Resolve(tplan, amend, session)
	assert.Equal(t, policy.Outcome{Run: true, Sandboxed: true, PersistAllowPrefix: argv("cargo test")}, out)
	assert.Equal(t, [][]string{argv("cargo test")}, session.AllowPrefixes())
	later := policy.PlanExec(policy.ExecRequest{Command: argv("cargo test --all"), Cwd: "/other", Approval: untrusted, Sandbox: workspace, Session: session})
	assert.Equal(t, policy.ActionRunUnsandboxed, later.Action, "an allow rule bypasses the sandbox")
	// An empty amendment is a plain accept.
	out = policy.Resolve(tplan, policy.ReviewDecision{Kind: policy.AcceptWithExecpolicyAmendment}, session)
	assert.Equal(t, policy.Outcome{Run: true, Sandboxed: true}, out)

	// Network amendments.
	allow := policy.ReviewDecision{Kind: policy.ApplyNetworkPolicyAmendment, NetworkAmendment: &policy.NetworkAmendment{Host: "example.com", Action: "allow"}}
	out = policy.Resolve(plan, allow, session)
	assert.True(t, out.Run)
	assert.Equal(t, &policy.NetworkAmendment{Host: "example.com", Action: "allow"}, out.NetworkAmendment)
	deny := policy.ReviewDecision{Kind: policy.ApplyNetworkPolicyAmendment, NetworkAmendment: &policy.NetworkAmendment{Host: "evil.com", Action: "deny"}}
	out = policy.Resolve(plan, deny, session)
	assert.False(t, out.Run)
	assert.Equal(t, "exec command rejected by user", out.Message)
	assert.Equal(t, []policy.NetworkAmendment{{Host: "example.com", Action: "allow"}, {Host: "evil.com", Action: "deny"}}, session.NetworkAmendments())

	// An escalated command runs outside the sandbox once approved.
	eplan := policy.PlanExec(policy.ExecRequest{Command: argv("cargo build"), Cwd: "/w", Approval: onRequest, Sandbox: workspace, Escalation: escalated, Session: session})
	require.Equal(t, policy.ActionNeedsApproval, eplan.Action)
	assert.Equal(t, policy.Outcome{Run: true}, policy.Resolve(eplan, policy.ReviewDecision{Kind: policy.AcceptForSession}, session))
	assert.Equal(t, policy.ActionRunUnsandboxed, policy.PlanExec(policy.ExecRequest{Command: argv("cargo build"), Cwd: "/w", Approval: onRequest, Sandbox: workspace, Escalation: escalated, Session: session}).Action)
	assert.Equal(t, policy.ActionSkip, policy.PlanExec(policy.ExecRequest{Command: argv("cargo build"), Cwd: "/w", Approval: onRequest, Sandbox: workspace, Session: session}).Action,
		"the escalation is part of the remembered key; without it the command runs sandboxed as usual")

	// A nil session is allowed and remembers nothing.
	out = policy.Resolve(plan, policy.ReviewDecision{Kind: policy.AcceptForSession}, nil)
	assert.True(t, out.Run)
}

func TestPlanRetryMatrix(t *testing.T) {
	const (
		D = policy.RetryReturnDenial
		K = policy.RetryAsk
		R = policy.RetryRerunUnsandboxed
	)
	cases := []struct {
		name  string
		p     policy.ApprovalPolicy
		shell [2]policy.RetryAction // not approved, approved
		patch [2]policy.RetryAction
	}{
		{"untrusted", untrusted, [2]policy.RetryAction{K, R}, [2]policy.RetryAction{K, R}},
		{"on-failure", onFailure, [2]policy.RetryAction{K, R}, [2]policy.RetryAction{K, R}},
		{"on-request", onRequest, [2]policy.RetryAction{D, D}, [2]policy.RetryAction{K, R}},
		{"never", never, [2]policy.RetryAction{D, D}, [2]policy.RetryAction{D, D}},
		{"granular", granularAll, [2]policy.RetryAction{K, R}, [2]policy.RetryAction{K, R}},
		{"granular-none", granularNone, [2]policy.RetryAction{D, D}, [2]policy.RetryAction{D, D}},
	}
	for _, c := range cases {
		shell := policy.PlanExec(policy.ExecRequest{Command: argv("touch /etc/x"), Cwd: "/w", Approval: c.p, Sandbox: workspace})
		patch := policy.PlanPatch(policy.Patch{Cwd: "/w", Changes: []policy.FileChange{{Kind: policy.ChangeAdd, Path: "a"}}}, c.p, workspace, nil)
		for i, approved := range []bool{false, true} {
			assert.Equal(t, c.shell[i], policy.PlanRetry(shell, approved, nil).Action, "%s shell approved=%v", c.name, approved)
			assert.Equal(t, c.patch[i], policy.PlanRetry(patch, approved, nil).Action, "%s patch approved=%v", c.name, approved)
		}
	}
}

func TestRetryPromptAndSessionBypass(t *testing.T) {
	session := policy.NewSessionApprovals()
	plan := policy.PlanExec(policy.ExecRequest{Command: argv("touch /etc/x"), Cwd: "/w", Approval: onFailure, Sandbox: workspace, Session: session})
	require.Equal(t, policy.ActionSkip, plan.Action)
	retry := policy.PlanRetry(plan, false, session)
	require.Equal(t, policy.RetryAsk, retry.Action)
	assert.Equal(t, "command failed; retry without sandbox?", retry.Reason)
	assert.Equal(t, argv("touch /etc/x"), retry.ProposedAmendment, "the allow-heuristic amendment is offered")
	assert.Equal(t, []policy.ReviewDecision{{Kind: policy.Accept}, {Kind: policy.AcceptWithExecpolicyAmendment, ExecpolicyAmendment: argv("touch /etc/x")}, {Kind: policy.Cancel}}, retry.AvailableDecisions)

	out := retry.Resolve(policy.ReviewDecision{Kind: policy.AcceptForSession}, session)
	assert.Equal(t, policy.Outcome{Run: true, Sandboxed: false}, out, "an approved retry runs unsandboxed")
	plan = policy.PlanExec(policy.ExecRequest{Command: argv("touch /etc/x"), Cwd: "/w", Approval: onFailure, Sandbox: workspace, Session: session})
	assert.Equal(t, policy.RetryRerunUnsandboxed, policy.PlanRetry(plan, false, session).Action, "approved for the session: no second prompt")

	out = retry.Resolve(policy.ReviewDecision{Kind: policy.Decline}, session)
	assert.Equal(t, "exec command rejected by user", out.Message)

	// A patch retry offers the patch decisions and rejects with the patch text.
	pplan := policy.PlanPatch(policy.Patch{Cwd: "/w", Changes: []policy.FileChange{{Kind: policy.ChangeAdd, Path: "a"}}}, onRequest, workspace, nil)
	pr := policy.PlanRetry(pplan, false, nil)
	require.Equal(t, policy.RetryAsk, pr.Action)
	assert.Equal(t, policy.PatchAvailableDecisions(), pr.AvailableDecisions)
	assert.Nil(t, pr.ProposedAmendment)
	assert.Equal(t, "patch rejected by user", pr.Resolve(policy.ReviewDecision{Kind: policy.Cancel}, nil).Message)
}

func TestReviewDecisionJSON(t *testing.T) {
	cases := []struct {
		wire string
		d    policy.ReviewDecision
	}{
		{`"accept"`, policy.ReviewDecision{Kind: policy.Accept}},
		{`"acceptForSession"`, policy.ReviewDecision{Kind: policy.AcceptForSession}},
		{`"decline"`, policy.ReviewDecision{Kind: policy.Decline}},
		{`"cancel"`, policy.ReviewDecision{Kind: policy.Cancel}},
		{`{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["git","pull"]}}`,
			policy.ReviewDecision{Kind: policy.AcceptWithExecpolicyAmendment, ExecpolicyAmendment: []string{"git", "pull"}}},
		{`{"applyNetworkPolicyAmendment":{"network_policy_amendment":{"host":"a.com","action":"deny"}}}`,
			policy.ReviewDecision{Kind: policy.ApplyNetworkPolicyAmendment, NetworkAmendment: &policy.NetworkAmendment{Host: "a.com", Action: "deny"}}},
	}
	for _, c := range cases {
		var d policy.ReviewDecision
		require.NoError(t, json.Unmarshal([]byte(c.wire), &d), c.wire)
		assert.Equal(t, c.d, d)
		b, err := json.Marshal(d)
		require.NoError(t, err)
		assert.JSONEq(t, c.wire, string(b))
	}
	for _, bad := range []string{`"approve"`, `"approved"`, `{"acceptWithExecpolicyAmendment":{}}`, `{"applyNetworkPolicyAmendment":{}}`,
		`{"applyNetworkPolicyAmendment":{"network_policy_amendment":{"host":"a","action":"maybe"}}}`, `{"x":1}`, `{}`, `7`} {
		var d policy.ReviewDecision
		assert.Error(t, json.Unmarshal([]byte(bad), &d), bad)
	}
	assert.True(t, policy.ReviewDecision{Kind: policy.Accept}.Approved())
	assert.True(t, policy.ReviewDecision{Kind: policy.AcceptForSession}.Approved())
	assert.True(t, policy.ReviewDecision{Kind: policy.AcceptWithExecpolicyAmendment}.Approved())
	assert.False(t, policy.ReviewDecision{Kind: policy.Decline}.Approved())
	assert.False(t, policy.ReviewDecision{Kind: policy.Cancel}.Approved())
	assert.False(t, policy.ReviewDecision{Kind: policy.ApplyNetworkPolicyAmendment}.Approved())
}

func TestDefaultAvailableDecisions(t *testing.T) {
	js := func(ds []policy.ReviewDecision) string {
		b, err := json.Marshal(ds)
		require.NoError(t, err)
		return string(b)
	}
	assert.JSONEq(t, `["accept","cancel"]`, js(policy.DefaultAvailableDecisions(false, nil, nil, false)))
	assert.JSONEq(t, `["accept",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["ls"]}},"cancel"]`, js(policy.DefaultAvailableDecisions(false, []string{"ls"}, nil, false)))
	assert.JSONEq(t, `["accept","cancel"]`, js(policy.DefaultAvailableDecisions(false, []string{"ls"}, nil, true)))
	assert.JSONEq(t, `["accept","acceptForSession",{"applyNetworkPolicyAmendment":{"network_policy_amendment":{"host":"b","action":"allow"}}},"cancel"]`,
		js(policy.DefaultAvailableDecisions(true, []string{"ls"}, []policy.NetworkAmendment{{Host: "a", Action: "deny"}, {Host: "b", Action: "allow"}, {Host: "c", Action: "allow"}}, true)))
	assert.JSONEq(t, `["accept","acceptForSession","cancel"]`, js(policy.DefaultAvailableDecisions(true, nil, nil, false)))
	assert.JSONEq(t, `["accept","acceptForSession","decline","cancel"]`, js(policy.PatchAvailableDecisions()))
}
