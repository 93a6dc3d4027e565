package shell

import (
	"context"
	"errors"
	"time"

	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/sandbox"
)

// RunRequest is one command a shell tool wants to run.
type RunRequest struct {
	// Invocation is the tool call (turn, call id, tool name).
	Invocation registry.Invocation
	// Argv is the command (for shell_command, the shell invocation).
	Argv []string
	// Cwd is the resolved working directory.
	Cwd string
	// TurnCwd is the turn's cwd, where writable roots are resolved.
	TurnCwd string
	// Env is the command's environment.
	Env []string
	// Timeout stops the command; zero means none.
	Timeout time.Duration
	// Escalation is what the model asked for (sandbox_permissions, ...).
	Escalation policy.Escalation
	// OnOutput receives output deltas; may be nil.
	OnOutput func(OutputDelta)
	// Snapshots, when set, run a login-shell invocation from
	// SnapshotOwner's login-shell snapshot for the policy each attempt
	// runs under (Snapshots.For).
	Snapshots     *Snapshots
	SnapshotOwner string
}

// Runner decides how a command runs (approval, sandbox, retry) and runs it.
// The integration layer implements it (or configures PolicyRunner) per turn.
// A returned error is answered to the model as the tool's failure text
// (e.g. "exec command rejected by user"), unless it matches
// registry.ErrFatal.
type Runner interface {
	Run(ctx context.Context, req RunRequest) (ExecResult, error)
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, req RunRequest) (ExecResult, error)

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, req RunRequest) (ExecResult, error) { return f(ctx, req) }

// SandboxRunner runs every command under one sandbox policy, without
// approvals: escalation requests are refused with the reference's text for
// a policy that cannot ask (as under "never"). It is the default Runner.
type SandboxRunner struct {
	// Policy is the sandbox policy; the zero value is read-only.
	Policy policy.SandboxPolicy
	// Sandbox builds the commands; nil uses sandbox.Default().
	Sandbox *sandbox.Sandbox
	// Pool is the sandbox's pool key (ExecRequest.Pool).
	Pool string
}

// Run implements Runner.
func (r SandboxRunner) Run(ctx context.Context, req RunRequest) (ExecResult, error) {
	if req.Escalation.RequiresEscalated() || req.Escalation.Permissions == policy.WithAdditionalPermissions {
		return ExecResult{}, errors.New(policy.EscalationRejection(policy.ApprovalPolicy{Mode: policy.Never}))
	}
	return execFor(ctx, r.Sandbox, r.Pool, req, r.Policy)
}

// execFor runs req under p, in sb with pool key pool.
func execFor(ctx context.Context, sb *sandbox.Sandbox, pool string, req RunRequest, p policy.SandboxPolicy) (ExecResult, error) {
	return Exec(ctx, ExecRequest{
		Argv: req.Argv, Cwd: req.Cwd, Env: req.Env, Timeout: req.Timeout,
		Policy: p, PolicyCwd: req.TurnCwd, Sandbox: sb, Pool: pool, OnOutput: req.OnOutput,
		Snapshot: req.Snapshots.For(req.SnapshotOwner, p),
	})
}

// ApprovalRequest is what PolicyRunner asks the client.
type ApprovalRequest struct {
	// Run is the command.
	Run RunRequest
	// Reason is the request's reason (may be empty).
	Reason string
	// ProposedAmendment is the proposed "always allow" prefix, if any.
	ProposedAmendment []string
	// AvailableDecisions are the choices to offer.
	AvailableDecisions []policy.ReviewDecision
	// Retry is set for the "retry without sandbox?" prompt after a denial.
	Retry bool
}

// ErrInterruptTurn is wrapped by the error PolicyRunner returns when the
// user answered "cancel": the caller must interrupt the turn after answering
// the model.
var ErrInterruptTurn = errors.New("turn interrupted by approval cancel")

type interruptError struct{ msg string }

func (e *interruptError) Error() string        { return e.msg }
func (e *interruptError) Is(target error) bool { return target == ErrInterruptTurn }

// PolicyRunner runs the orchestrator flow of docs/tools.md §4.3 with
// policy.PlanExec: forbidden commands are refused, approvals are asked
// through Ask, the first attempt is sandboxed unless the plan says
// otherwise, and a sandbox denial may lead to a retry prompt and an
// unsandboxed re-run (policy.PlanRetry).
type PolicyRunner struct {
	// Approval is the turn's approval policy.
	Approval policy.ApprovalPolicy
	// SandboxPolicy is the turn's sandbox policy.
	SandboxPolicy policy.SandboxPolicy
	// Rules are the loaded exec-policy rules; nil for none.
	Rules *policy.RuleSet
	// Session is the thread's approvals; nil remembers nothing.
	Session *policy.SessionApprovals
	// Ask sends an approval request to the client and returns its decision.
	// Nil, or an error, declines (the model reads the rejection).
	Ask func(ctx context.Context, req ApprovalRequest) (policy.ReviewDecision, error)
	// OnAllowPrefix, when set, persists an accepted exec-policy amendment
	// (policy.AppendAllowRule to the user's default.rules).
	OnAllowPrefix func(prefix []string)
	// Sandbox builds the commands; nil uses sandbox.Default().
	Sandbox *sandbox.Sandbox
	// Pool is the sandbox's pool key (ExecRequest.Pool): the thread.
	Pool string
}

// Run implements Runner: it plans the command, then runs it as RunPlanned.
func (r *PolicyRunner) Run(ctx context.Context, req RunRequest) (ExecResult, error) {
	return r.RunPlanned(ctx, req, r.Plan(req))
}

// Plan is the command's plan under the runner's policies (policy.PlanExec).
func (r *PolicyRunner) Plan(req RunRequest) policy.Plan {
	return policy.PlanExec(policy.ExecRequest{
		Command: req.Argv, Cwd: req.Cwd, Approval: r.Approval, Sandbox: r.SandboxPolicy,
		Escalation: req.Escalation, Rules: r.Rules, Session: r.Session,
	})
}

// RunPlanned runs the command as plan says, for a caller that planned it
// already (with Plan) to decide what to show before it runs: the command
// is planned once, so what the caller showed and what runs cannot differ
// when the thread's session approvals change in between.
func (r *PolicyRunner) RunPlanned(ctx context.Context, req RunRequest, plan policy.Plan) (ExecResult, error) {
	sandboxed, approved := true, false
	switch plan.Action {
	case policy.ActionForbidden:
		return ExecResult{}, errors.New(plan.Reason)
	case policy.ActionRunUnsandboxed:
		sandboxed = false
	case policy.ActionNeedsApproval:
		d := r.ask(ctx, ApprovalRequest{Run: req, Reason: plan.Reason, ProposedAmendment: plan.ProposedAmendment, AvailableDecisions: plan.AvailableDecisions})
		out := policy.Resolve(plan, d, r.Session)
		if err := r.outcome(out); err != nil {
			return ExecResult{}, err
		}
		sandboxed, approved = out.Sandboxed, true
	}
	if !sandbox.Sandboxed(r.SandboxPolicy) {
		sandboxed = false
	}
	res, err := execFor(ctx, r.Sandbox, r.Pool, req, r.attemptPolicy(sandboxed))
	if err != nil || !sandboxed || !policy.IsSandboxDenial(res.SandboxRun()) {
		return res, err
	}
	retry := policy.PlanRetry(plan, approved, r.Session)
	switch retry.Action {
	case policy.RetryReturnDenial:
		return res, nil
	case policy.RetryAsk:
		d := r.ask(ctx, ApprovalRequest{Run: req, Reason: retry.Reason, ProposedAmendment: retry.ProposedAmendment, AvailableDecisions: retry.AvailableDecisions, Retry: true})
		if err := r.outcome(retry.Resolve(d, r.Session)); err != nil {
			return ExecResult{}, err
		}
	}
	return execFor(ctx, r.Sandbox, r.Pool, req, r.attemptPolicy(false))
}

// attemptPolicy is the policy one attempt runs under: the turn's, or full
// access for an unsandboxed attempt.
func (r *PolicyRunner) attemptPolicy(sandboxed bool) policy.SandboxPolicy {
	if sandboxed {
		return r.SandboxPolicy
	}
	return policy.SandboxPolicy{Kind: policy.DangerFullAccess}
}

func (r *PolicyRunner) ask(ctx context.Context, a ApprovalRequest) policy.ReviewDecision {
	if r.Ask == nil {
		return policy.ReviewDecision{Kind: policy.Decline}
	}
	d, err := r.Ask(ctx, a)
	if err != nil {
		return policy.ReviewDecision{Kind: policy.Decline}
	}
	return d
}

// outcome turns a resolved approval into nil (run) or the model's error.
func (r *PolicyRunner) outcome(out policy.Outcome) error {
	if len(out.PersistAllowPrefix) > 0 && r.OnAllowPrefix != nil {
		r.OnAllowPrefix(out.PersistAllowPrefix)
	}
	if out.Run {
		return nil
	}
	if out.InterruptTurn {
		return &interruptError{msg: out.Message}
	}
	return errors.New(out.Message)
}
