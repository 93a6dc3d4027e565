package httpapi

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/turns"
)

// A principal cannot create a thread beyond its ceiling; one that asks for
// nothing gets the daemon's defaults lowered to the ceiling; the operator
// has no ceiling.
func TestPrincipalPolicyCeiling(t *testing.T) {
	e := newEnv(t, envOpts{
		token:      "operator-token",
		principals: map[string]string{"ci": "ci-token"},
		config: func(c *Config) {
			c.Ceiling = Ceiling{DefaultSandbox: api.SandboxDangerFullAccess, DefaultApproval: api.ApprovalNever}
		},
	})
	ci := tok("ci-token")
	effective := func(threadID string) (api.SandboxPolicyType, api.AskForApproval) {
		t.Helper()
		res, after, err := e.mgr.ResumeThread(context.Background(), turns.Caller{Conn: 1 << 40}, api.ThreadResumeParams{ThreadID: threadID})
		require.NoError(t, err)
		if after != nil {
			after()
		}
		return res.Sandbox.Type, res.ApprovalPolicy
	}

	for _, body := range []map[string]any{
		{"sandbox": "danger-full-access"},
		{"sandbox": "danger-full-access", "approvalPolicy": "untrusted"},
	} {
		r := e.do(req{method: "POST", path: "/v1/threads", body: body, token: ci})
		require.Equal(t, http.StatusForbidden, r.status, "%v: %s", body, r.body)
		p := r.problem(t)
		require.Equal(t, api.ProblemForbidden, p.Type)
		require.Contains(t, p.Detail, `sandbox "danger-full-access" is beyond this principal's ceiling "workspace-write"`)
	}

	// Asking for nothing: the daemon's full-access default is lowered.
	th := e.createThread(nil, ci)
	sb, ap := effective(th.ID)
	require.Equal(t, api.SandboxPolicyType("workspaceWrite"), sb)
	require.Equal(t, api.ApprovalNever, ap.Policy, "never is fine inside the sandbox")

	th = e.createThread(map[string]any{"sandbox": "read-only", "approvalPolicy": "untrusted"}, ci)
	sb, ap = effective(th.ID)
	require.Equal(t, api.SandboxPolicyType("readOnly"), sb)
	require.Equal(t, api.ApprovalUntrusted, ap.Policy)

	// The operator is not bounded.
	th = e.createThread(map[string]any{"sandbox": "danger-full-access"}, nil)
	sb, _ = effective(th.ID)
	require.Equal(t, api.SandboxPolicyType("dangerFullAccess"), sb)
}

func TestCeilingApply(t *testing.T) {
	mode := func(m api.SandboxMode) *api.SandboxMode { return &m }
	pol := func(p api.ApprovalPolicy) *api.AskForApproval { return &api.AskForApproval{Policy: p} }
	for _, tc := range []struct {
		name      string
		c         Ceiling
		s         *api.SandboxMode
		a         *api.AskForApproval
		wantS     api.SandboxMode
		wantA     api.ApprovalPolicy
		forbidden string
	}{
		{name: "defaults within", c: Ceiling{DefaultSandbox: api.SandboxReadOnly, DefaultApproval: api.ApprovalOnRequest}, wantS: api.SandboxReadOnly, wantA: api.ApprovalOnRequest},
		{name: "approval over", c: Ceiling{MaxApproval: api.ApprovalOnRequest}, a: pol(api.ApprovalNever), forbidden: `approval policy "never" is beyond`},
		{name: "on-failure over on-request", c: Ceiling{MaxApproval: api.ApprovalOnRequest}, a: pol("on-failure"), forbidden: "beyond"},
		{name: "default approval lowered", c: Ceiling{MaxApproval: api.ApprovalUntrusted, DefaultApproval: api.ApprovalNever}, wantS: api.SandboxWorkspaceWrite, wantA: api.ApprovalUntrusted},
		{name: "granular counts as on-request", c: Ceiling{MaxApproval: api.ApprovalUntrusted}, a: &api.AskForApproval{Granular: &api.GranularApproval{}}, forbidden: "approval policy granular is beyond"},
		{name: "full access and never asked for", c: Ceiling{MaxSandbox: api.SandboxDangerFullAccess}, s: mode(api.SandboxDangerFullAccess), a: pol(api.ApprovalNever), forbidden: `needs principal_max_approval = "never"`},
		{name: "full access, never by default", c: Ceiling{MaxSandbox: api.SandboxDangerFullAccess, DefaultApproval: api.ApprovalNever}, s: mode(api.SandboxDangerFullAccess), wantS: api.SandboxDangerFullAccess, wantA: api.ApprovalOnRequest},
		{name: "full access and never granted", c: Ceiling{MaxSandbox: api.SandboxDangerFullAccess, MaxApproval: api.ApprovalNever, AllowNeverWithFullAccess: true}, s: mode(api.SandboxDangerFullAccess), a: pol(api.ApprovalNever), wantS: api.SandboxDangerFullAccess, wantA: api.ApprovalNever},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, a, p := tc.c.apply(tc.s, tc.a)
			if tc.forbidden != "" {
				require.NotNil(t, p)
				require.Equal(t, http.StatusForbidden, p.status)
				require.Contains(t, p.detail, tc.forbidden)
				return
			}
			require.Nil(t, p)
			require.Equal(t, tc.wantS, *s)
			require.Equal(t, tc.wantA, a.Policy)
		})
	}
}
