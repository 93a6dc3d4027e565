package policy_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/policy"
)

func TestApprovalFromAPI(t *testing.T) {
	for _, tc := range []struct {
		in      api.AskForApproval
		want    policy.ApprovalPolicy
		wantErr bool
	}{
		{in: api.AskForApproval{Policy: "untrusted"}, want: policy.ApprovalPolicy{Mode: policy.Untrusted}},
		{in: api.AskForApproval{Policy: "on-request"}, want: policy.ApprovalPolicy{Mode: policy.OnRequest}},
		{in: api.AskForApproval{Policy: "on-failure"}, want: policy.ApprovalPolicy{Mode: policy.OnFailure}},
		{in: api.AskForApproval{Policy: "never"}, want: policy.ApprovalPolicy{Mode: policy.Never}},
		{in: api.AskForApproval{Policy: "never", Granular: &api.GranularApproval{SandboxApproval: true, McpElicitations: true}},
			want: policy.ApprovalPolicy{Mode: policy.Granular, Granular: policy.GranularApproval{SandboxApproval: true, McpElicitations: true}}},
		{in: api.AskForApproval{Granular: &api.GranularApproval{Rules: true, SkillApproval: true, RequestPermissions: true}},
			want: policy.ApprovalPolicy{Mode: policy.Granular, Granular: policy.GranularApproval{Rules: true, SkillApproval: true, RequestPermissions: true}}},
		{in: api.AskForApproval{Policy: "sometimes"}, wantErr: true},
		{in: api.AskForApproval{}, wantErr: true},
	} {
		got, err := policy.ApprovalFromAPI(tc.in)
		if tc.wantErr {
			require.Error(t, err, "%+v", tc.in)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "%+v", tc.in)
		// The wire forms agree: what the thread stored is what runs.
		require.Equal(t, mustJSON(t, tc.in), mustJSON(t, got))
	}
}

func TestSandboxFromAPI(t *testing.T) {
	for _, tc := range []struct {
		in      api.SandboxPolicy
		want    policy.SandboxPolicy
		wantErr bool
	}{
		{in: api.SandboxPolicy{Type: api.SandboxPolicyReadOnly}, want: policy.SandboxPolicy{Kind: policy.ReadOnly}},
		{in: api.SandboxPolicy{Type: api.SandboxPolicyReadOnly, NetworkAccess: true, WritableRoots: []string{"/ignored"}},
			want: policy.SandboxPolicy{Kind: policy.ReadOnly, NetworkAccess: true}},
		{in: api.SandboxPolicy{Type: api.SandboxPolicyWorkspaceWrite, WritableRoots: []string{"/a", "/b"}, NetworkAccess: true, ExcludeTmpdirEnvVar: true, ExcludeSlashTmp: true},
			want: policy.SandboxPolicy{Kind: policy.WorkspaceWrite, WritableRoots: []string{"/a", "/b"}, NetworkAccess: true, ExcludeTmpdirEnvVar: true, ExcludeSlashTmp: true}},
		{in: api.SandboxPolicy{Type: api.SandboxPolicyWorkspaceWrite, WritableRoots: []string{}},
			want: policy.SandboxPolicy{Kind: policy.WorkspaceWrite}},
		{in: api.SandboxPolicy{Type: api.SandboxPolicyDangerFullAccess, NetworkAccess: false}, want: policy.SandboxPolicy{Kind: policy.DangerFullAccess}},
		{in: api.SandboxPolicy{Type: api.SandboxPolicyExternalSandbox}, want: policy.SandboxPolicy{Kind: policy.ExternalSandbox}},
		{in: api.SandboxPolicy{Type: api.SandboxPolicyExternalSandbox, ExternalNetworkAccess: api.NetworkRestricted}, want: policy.SandboxPolicy{Kind: policy.ExternalSandbox}},
		{in: api.SandboxPolicy{Type: api.SandboxPolicyExternalSandbox, ExternalNetworkAccess: api.NetworkEnabled}, want: policy.SandboxPolicy{Kind: policy.ExternalSandbox, NetworkAccess: true}},
		{in: api.SandboxPolicy{Type: api.SandboxPolicyExternalSandbox, ExternalNetworkAccess: "wide-open"}, wantErr: true},
		{in: api.SandboxPolicy{Type: "workspace-write"}, wantErr: true},
		{in: api.SandboxPolicy{}, wantErr: true},
	} {
		got, err := policy.SandboxFromAPI(tc.in)
		if tc.wantErr {
			require.Error(t, err, "%+v", tc.in)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "%+v", tc.in)
		require.Equal(t, mustJSON(t, tc.in), mustJSON(t, got))
	}
	// The converted roots are the policy's own: the thread's stay as they were.
	in := api.SandboxPolicy{Type: api.SandboxPolicyWorkspaceWrite, WritableRoots: []string{"/a"}}
	got, err := policy.SandboxFromAPI(in)
	require.NoError(t, err)
	got.WritableRoots[0] = "/changed"
	require.Equal(t, "/a", in.WritableRoots[0])
}

func TestAPIDecisions(t *testing.T) {
	require.Nil(t, policy.APIDecisions(nil), "no decisions: the field is omitted")
	for _, tc := range []struct {
		in   policy.ReviewDecision
		want string
	}{
		{policy.ReviewDecision{Kind: policy.Accept}, `"accept"`},
		{policy.ReviewDecision{Kind: policy.AcceptForSession}, `"acceptForSession"`},
		{policy.ReviewDecision{Kind: policy.Decline}, `"decline"`},
		{policy.ReviewDecision{Kind: policy.Cancel}, `"cancel"`},
		{policy.ReviewDecision{Kind: policy.AcceptWithExecpolicyAmendment, ExecpolicyAmendment: []string{"git", "status"}},
			`{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["git","status"]}}`},
		{policy.ReviewDecision{Kind: policy.AcceptWithExecpolicyAmendment}, `{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":[]}}`},
		{policy.ReviewDecision{Kind: policy.ApplyNetworkPolicyAmendment, NetworkAmendment: &policy.NetworkAmendment{Host: "example.com", Action: "allow"}},
			`{"applyNetworkPolicyAmendment":{"network_policy_amendment":{"host":"example.com","action":"allow"}}}`},
		{policy.ReviewDecision{Kind: policy.ApplyNetworkPolicyAmendment}, `{"applyNetworkPolicyAmendment":{"network_policy_amendment":{"host":"","action":""}}}`},
	} {
		got := policy.APIDecisions([]policy.ReviewDecision{tc.in})
		require.Len(t, got, 1)
		require.JSONEq(t, tc.want, mustJSON(t, got[0]), "%+v", tc.in)
		// The wire form is the one the policy package writes.
		require.JSONEq(t, mustJSON(t, tc.in), mustJSON(t, got[0]))
	}
	// The default choices of a command approval, in order.
	ds := policy.DefaultAvailableDecisions(false, []string{"touch"}, nil, false)
	require.JSONEq(t, `["accept",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["touch"]}},"cancel"]`, mustJSON(t, policy.APIDecisions(ds)))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
