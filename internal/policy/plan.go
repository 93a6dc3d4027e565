package policy

import "slices"

// Tool says which retry and rejection rules apply to a call.
type Tool int

// The tool families.
const (
	// ToolShell covers shell, shell_command, exec_command and other
	// command runners.
	ToolShell Tool = iota
	// ToolPatch is apply_patch.
	ToolPatch
)

// Action is what the caller must do with a call before running it.
type Action int

// The actions (docs/tools.md §4.3 flow, step 1 and 2).
const (
	// ActionSkip runs the call in the sandbox without asking.
	ActionSkip Action = iota
	// ActionRunUnsandboxed runs the call without a sandbox and without
	// asking (rule allow, full access, or an escalation approved for the
	// session).
	ActionRunUnsandboxed
	// ActionNeedsApproval sends an approval request first; see Resolve.
	ActionNeedsApproval
	// ActionForbidden returns Plan.Reason to the model without running.
	ActionForbidden
)

// String names the action.
func (a Action) String() string {
	switch a {
	case ActionRunUnsandboxed:
		return "run-unsandboxed"
	case ActionNeedsApproval:
		return "needs-approval"
	case ActionForbidden:
		return "forbidden"
	default:
		return "skip"
	}
}

// Plan is the orchestrator's decision for one call.
type Plan struct {
	// Tool is the tool family the plan is for.
	Tool Tool
	// Approval is the approval policy the plan was made under.
	Approval ApprovalPolicy
	// Action is what to do.
	Action Action
	// Reason is, for ActionNeedsApproval, the approval request's reason (a
	// rule's reason, else the model's justification; may be empty) and, for
	// ActionForbidden, the exact text to return to the model.
	Reason string
	// ProposedAmendment is the exec-policy prefix the approval request
	// proposes (proposedExecpolicyAmendment); for a skipped command it is the
	// prefix a later retry prompt proposes.
	ProposedAmendment []string
	// AvailableDecisions are the choices to offer (ActionNeedsApproval).
	AvailableDecisions []ReviewDecision
	// SandboxedAfterApproval says whether the first run after an approval is
	// sandboxed (ActionNeedsApproval).
	SandboxedAfterApproval bool
	// PreApproved is true when a session approval stood in for a prompt.
	PreApproved bool
	// ApprovalKeys identify the call for acceptForSession.
	ApprovalKeys []string
	// Requirement is the underlying requirement (commands only).
	Requirement Requirement
}

// ExecRequest is one command call to plan.
type ExecRequest struct {
	// Command is the argv to run (for shell_command, the shell invocation).
	Command []string
	// Cwd is the working directory.
	Cwd string
	// Approval is the effective approval policy of the turn.
	Approval ApprovalPolicy
	// Sandbox is the effective sandbox policy of the turn.
	Sandbox SandboxPolicy
	// Escalation is what the model asked for.
	Escalation Escalation
	// Rules are the loaded exec-policy rules; nil for none.
	Rules *RuleSet
	// Session is the thread's approvals; nil for none.
	Session *SessionApprovals
}

// PlanExec decides how to run a command (docs/tools.md §4.3): an escalation (or
// additional-permissions) request outside on-request is refused with
// EscalationRejection; otherwise the exec-policy
// requirement decides. A prompt the session already approved runs without
// asking. A skipped command runs unsandboxed when a rule allowed it, the
// model's escalation applies, or the policy has full access.
func PlanExec(req ExecRequest) Plan {
	p := Plan{Tool: ToolShell, Approval: req.Approval}
	esc := req.Escalation
	// Current Codex refuses any sandbox override (escalation or additional
	// permissions) outside on-request before looking at the command.
	if esc.requestsOverride() && req.Approval.Mode != OnRequest {
		p.Action, p.Reason = ActionForbidden, EscalationRejection(req.Approval)
		return p
	}
	r := ExecRequirement(req.Command, req.Approval, req.Sandbox, esc, req.Rules, req.Session.Rules())
	p.Requirement = r
	p.ApprovalKeys = []string{CommandApprovalKey(req.Command, req.Cwd, esc.Permissions)}
	p.ProposedAmendment = slices.Clone(r.ProposedAmendment)
	unsandboxed := esc.RequiresEscalated() || req.Sandbox.HasFullDiskWriteAccess()
	switch r.Kind {
	case RequirementForbidden:
		p.Action, p.Reason = ActionForbidden, r.Reason
	case RequirementNeedsApproval:
		if req.Session.IsApproved(p.ApprovalKeys) {
			p.PreApproved = true
			p.Action = runAction(unsandboxed)
			break
		}
		p.Action = ActionNeedsApproval
		p.Reason = r.Reason
		if p.Reason == "" {
			p.Reason = esc.Justification
		}
		p.AvailableDecisions = DefaultAvailableDecisions(false, r.ProposedAmendment, nil, esc.Permissions == WithAdditionalPermissions)
		p.SandboxedAfterApproval = !unsandboxed
	default:
		p.Action = runAction(unsandboxed || r.BypassSandbox)
	}
	return p
}

func runAction(unsandboxed bool) Action {
	if unsandboxed {
		return ActionRunUnsandboxed
	}
	return ActionSkip
}

// PlanPatch decides how to apply a patch: AssessPatch over the sandbox's
// writable roots for the patch's cwd plus the session's granted roots; a
// rejection answers the model with "patch rejected: <reason>"; a prompt for
// files all approved for the session runs without asking.
func PlanPatch(patch Patch, approval ApprovalPolicy, sandbox SandboxPolicy, session *SessionApprovals) Plan {
	p := Plan{Tool: ToolPatch, Approval: approval, ApprovalKeys: PatchApprovalKeys(patch)}
	roots := append(sandbox.WritableRootsWithCwd(patch.Cwd), session.WritableRoots()...)
	a := AssessPatch(patch, roots, sandbox, approval)
	full := sandbox.HasFullDiskWriteAccess()
	switch a.Verdict {
	case PatchReject:
		p.Action, p.Reason = ActionForbidden, a.ModelMessage()
	case PatchAutoApprove:
		p.Action = runAction(!a.Sandboxed)
	default:
		if session.IsApproved(p.ApprovalKeys) {
			p.PreApproved = true
			p.Action = runAction(full)
			break
		}
		p.Action = ActionNeedsApproval
		p.AvailableDecisions = PatchAvailableDecisions()
		p.SandboxedAfterApproval = !full
	}
	return p
}

// Outcome is what the caller must do after the client answered an approval
// request.
type Outcome struct {
	// Run says whether to run the call now.
	Run bool
	// Sandboxed says whether that run is sandboxed.
	Sandboxed bool
	// Message is the text for the model when the call does not run.
	Message string
	// InterruptTurn is set by cancel: stop the turn after answering.
	InterruptTurn bool
	// PersistAllowPrefix, when set, must be appended to the user's
	// default.rules (AppendAllowRule); the session already applies it.
	PersistAllowPrefix []string
	// NetworkAmendment, when set, is the host rule the user chose.
	NetworkAmendment *NetworkAmendment
}

// Resolve applies the client's decision to a plan's approval request and
// says what to do: accept runs (sandboxed per SandboxedAfterApproval);
// acceptForSession also remembers the call's keys; an exec-policy amendment
// also allows its prefix for the session and asks the caller to persist it;
// a network amendment runs when it allows and records the rule; decline and
// cancel answer the model with the tool's "rejected by user" text, cancel
// also interrupting the turn. session may be nil.
func Resolve(p Plan, d ReviewDecision, session *SessionApprovals) Outcome {
	return resolve(p, d, session, p.SandboxedAfterApproval)
}

func resolve(p Plan, d ReviewDecision, session *SessionApprovals, sandboxed bool) Outcome {
	rejected := ExecRejectedByUser
	if p.Tool == ToolPatch {
		rejected = PatchRejectedByUser
	}
	run := Outcome{Run: true, Sandboxed: sandboxed}
	switch d.Kind {
	case Accept:
		return run
	case AcceptForSession:
		session.Approve(p.ApprovalKeys)
		return run
	case AcceptWithExecpolicyAmendment:
		if len(d.ExecpolicyAmendment) > 0 && p.Tool == ToolShell {
			if err := session.AddAllowPrefix(d.ExecpolicyAmendment); err == nil {
				run.PersistAllowPrefix = slices.Clone(d.ExecpolicyAmendment)
			}
		}
		return run
	case ApplyNetworkPolicyAmendment:
		if d.NetworkAmendment != nil {
			a := *d.NetworkAmendment
			session.AddNetworkAmendment(a)
			if d.Approved() {
				run.NetworkAmendment = &a
				return run
			}
			return Outcome{Message: rejected, NetworkAmendment: &a}
		}
		return Outcome{Message: rejected}
	case Cancel:
		return Outcome{Message: rejected, InterruptTurn: true}
	default:
		return Outcome{Message: rejected}
	}
}

// RetryAction is what to do after a sandboxed attempt was denied.
type RetryAction int

// The retry actions (docs/tools.md §4.3 step 3).
const (
	// RetryReturnDenial gives the failed run's output to the model.
	RetryReturnDenial RetryAction = iota
	// RetryAsk asks the user whether to re-run without the sandbox.
	RetryAsk
	// RetryRerunUnsandboxed re-runs without the sandbox without asking.
	RetryRerunUnsandboxed
)

// Retry is the decision after a sandbox denial.
type Retry struct {
	// Action is what to do.
	Action RetryAction
	// Reason is the retry prompt's reason (RetryAsk).
	Reason string
	// ProposedAmendment is the prefix the retry prompt proposes (RetryAsk).
	ProposedAmendment []string
	// AvailableDecisions are the retry prompt's choices (RetryAsk).
	AvailableDecisions []ReviewDecision
	plan               Plan
}

// PlanRetry decides what follows a sandboxed attempt of plan p that looked
// like a sandbox denial (see IsSandboxDenial). Command tools ask to re-run
// outside the sandbox only under untrusted and on-failure (and granular with
// sandbox_approval); apply_patch under every policy but never (granular:
// with sandbox_approval). No prompt is needed when the call was approved by
// the user for this attempt (approved) or for the session.
func PlanRetry(p Plan, approved bool, session *SessionApprovals) Retry {
	r := Retry{plan: p}
	if !wantsNoSandboxRetry(p.Tool, p.Approval) {
		return r
	}
	if approved || p.PreApproved || session.IsApproved(p.ApprovalKeys) {
		r.Action = RetryRerunUnsandboxed
		return r
	}
	r.Action = RetryAsk
	r.Reason = RetryWithoutSandboxReason
	if p.Tool == ToolPatch {
		r.AvailableDecisions = PatchAvailableDecisions()
	} else {
		r.ProposedAmendment = slices.Clone(p.ProposedAmendment)
		r.AvailableDecisions = DefaultAvailableDecisions(false, r.ProposedAmendment, nil, false)
	}
	return r
}

func wantsNoSandboxRetry(t Tool, a ApprovalPolicy) bool {
	switch a.Mode {
	case Never:
		return false
	case Granular:
		return a.Granular.SandboxApproval
	case OnRequest:
		return t == ToolPatch
	default: // untrusted, on-failure
		return true
	}
}

// Resolve applies the client's answer to the retry prompt; an approved retry
// runs unsandboxed.
func (r Retry) Resolve(d ReviewDecision, session *SessionApprovals) Outcome {
	return resolve(r.plan, d, session, false)
}
