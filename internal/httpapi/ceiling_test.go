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
		token:          "operator-token",
		principals:     map[string]string{"ci": "ci-token"},
		sandbox:        "danger-full-access",
		approvalPolicy: "never",
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
