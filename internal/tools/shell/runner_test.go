package shell

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
)

func runReq(ws string, argv ...string) RunRequest {
	return RunRequest{Argv: argv, Cwd: ws, TurnCwd: ws, Env: []string{"PATH=" + os.Getenv("PATH")}, Timeout: DefaultTimeout}
}

func TestPolicyRunnerForbidden(t *testing.T) {
	r := &PolicyRunner{Approval: policy.ApprovalPolicy{Mode: policy.Never}, SandboxPolicy: wsPolicy()}
	req := runReq(t.TempDir(), "rm", "-rf", "x")
	_, err := r.Run(context.Background(), req)
	require.Error(t, err)
	require.Contains(t, err.Error(), "rejected")

	req = runReq(t.TempDir(), "ls")
	req.Escalation = policy.Escalation{Permissions: policy.RequireEscalated, Justification: "?"}
	_, err = r.Run(context.Background(), req)
	require.EqualError(t, err, policy.EscalationRejection(policy.ApprovalPolicy{Mode: policy.Never}))
}

func TestPolicyRunnerApproval(t *testing.T) {
	ws := t.TempDir()
	base := PolicyRunner{Approval: policy.ApprovalPolicy{Mode: policy.Untrusted}, SandboxPolicy: wsPolicy(), Session: policy.NewSessionApprovals()}

	// No client to ask: declined with the reference's text.
	r := base
	_, err := r.Run(context.Background(), runReq(ws, "touch", "a"))
	require.EqualError(t, err, policy.ExecRejectedByUser)
	require.NoFileExists(t, filepath.Join(ws, "a"))

	// Accept runs it (sandboxed: inside the workspace is fine).
	var asked []ApprovalRequest
	r.Ask = func(_ context.Context, a ApprovalRequest) (policy.ReviewDecision, error) {
		asked = append(asked, a)
		return policy.ReviewDecision{Kind: policy.Accept}, nil
	}
	res, err := r.Run(context.Background(), runReq(ws, "touch", "a"))
	require.NoError(t, err)
	require.Zero(t, res.ExitCode)
	require.FileExists(t, filepath.Join(ws, "a"))
	require.Len(t, asked, 1)
	require.False(t, asked[0].Retry)

	// Known-safe commands run without asking.
	res, err = r.Run(context.Background(), runReq(ws, "ls"))
	require.NoError(t, err)
	require.Equal(t, "a\n", string(res.Aggregated))
	require.Len(t, asked, 1)

	// Cancel interrupts the turn.
	r.Ask = func(context.Context, ApprovalRequest) (policy.ReviewDecision, error) {
		return policy.ReviewDecision{Kind: policy.Cancel}, nil
	}
	_, err = r.Run(context.Background(), runReq(ws, "touch", "b"))
	require.ErrorIs(t, err, ErrInterruptTurn)
	require.EqualError(t, err, policy.ExecRejectedByUser)

	// An Ask error declines.
	r.Ask = func(context.Context, ApprovalRequest) (policy.ReviewDecision, error) {
		return policy.ReviewDecision{}, errors.New("no client")
	}
	_, err = r.Run(context.Background(), runReq(ws, "touch", "c"))
	require.EqualError(t, err, policy.ExecRejectedByUser)
}

func TestPolicyRunnerRetryAfterDenial(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "out.txt")
	var asked []ApprovalRequest
	r := &PolicyRunner{
		Approval: policy.ApprovalPolicy{Mode: policy.OnFailure}, SandboxPolicy: wsPolicy(), Session: policy.NewSessionApprovals(),
		Ask: func(_ context.Context, a ApprovalRequest) (policy.ReviewDecision, error) {
			asked = append(asked, a)
			return policy.ReviewDecision{Kind: policy.Accept}, nil
		},
	}
	res, err := r.Run(context.Background(), runReq(ws, "/bin/sh", "-c", "echo hi > "+target))
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, string(res.Aggregated))
	require.False(t, res.Sandboxed, "the approved retry runs outside the sandbox")
	require.FileExists(t, target)
	require.Len(t, asked, 1)
	require.True(t, asked[0].Retry)
	require.Equal(t, policy.RetryWithoutSandboxReason, asked[0].Reason)

	// Under never the denial goes straight back to the model.
	r.Approval = policy.ApprovalPolicy{Mode: policy.Never}
	asked = nil
	target2 := filepath.Join(outside, "out2.txt")
	res, err = r.Run(context.Background(), runReq(ws, "/bin/sh", "-c", "echo hi > "+target2))
	require.NoError(t, err)
	require.NotZero(t, res.ExitCode)
	require.True(t, res.Sandboxed)
	require.True(t, policy.IsSandboxDenial(res.SandboxRun()))
	require.Empty(t, asked)
	require.NoFileExists(t, target2)
}

func TestPolicyRunnerFullAccessRunsDirectly(t *testing.T) {
	outside := t.TempDir()
	r := &PolicyRunner{Approval: policy.ApprovalPolicy{Mode: policy.OnRequest}, SandboxPolicy: policy.SandboxPolicy{Kind: policy.DangerFullAccess}}
	res, err := r.Run(context.Background(), runReq(t.TempDir(), "/bin/sh", "-c", "echo hi > "+filepath.Join(outside, "x")))
	require.NoError(t, err)
	require.Zero(t, res.ExitCode)
	require.False(t, res.Sandboxed)
}

// A command the caller planned runs as that plan says: when the thread's
// session approvals change between the plan and the run (another call's
// "allow this prefix" answer), the caller, which showed the approval's item
// already, still gets its approval asked.
func TestPolicyRunnerRunsThePlanItWasGiven(t *testing.T) {
	ws := t.TempDir()
	session := policy.NewSessionApprovals()
	asked := 0
	r := &PolicyRunner{
		Approval: policy.ApprovalPolicy{Mode: policy.Untrusted}, SandboxPolicy: wsPolicy(), Session: session,
		Ask: func(context.Context, ApprovalRequest) (policy.ReviewDecision, error) {
			asked++
			return policy.ReviewDecision{Kind: policy.Accept}, nil
		},
	}
	req := runReq(ws, "touch", "a")
	plan := r.Plan(req)
	require.Equal(t, policy.ActionNeedsApproval, plan.Action)
	require.NoError(t, session.AddAllowPrefix([]string{"touch"}))
	require.NotEqual(t, policy.ActionNeedsApproval, r.Plan(req).Action, "the new rule would let it run unasked")

	_, err := r.RunPlanned(context.Background(), req, plan)
	require.NoError(t, err)
	require.Equal(t, 1, asked, "the run follows the plan it was given")
	require.FileExists(t, filepath.Join(ws, "a"))
}
