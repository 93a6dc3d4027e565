package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/lossy"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/principal"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/tools/shell"
	"github.com/appserver/appserver/internal/turns"
)

// commandItem builds the inProgress commandExecution item of a call.
func commandItem(callID string, argv []string, cwd string, source api.CommandExecutionSource) *api.CommandExecutionItem {
	return &api.CommandExecutionItem{
		ID: callID, Command: policy.ShellJoin(argv), Cwd: cwd, Source: source,
		Status: api.StatusInProgress, CommandActions: commandActions(argv, cwd),
	}
}

// commandActions classifies a command for the client (read / listFiles /
// search / unknown) from its plain shell script, as Codex's parse_command
// does for the common cases; anything else is one unknown action carrying
// the script. A read's path is resolved against cwd, as the reference
// reports it.
func commandActions(argv []string, cwd string) api.List[api.CommandAction] {
	text := policy.ShellJoin(argv)
	cmds := [][]string{argv}
	if script, ok := policy.ShellScript(argv); ok {
		text = script
		cmds, ok = policy.ParsePlainScript(script)
		if !ok {
			cmds = nil
		}
	}
	unknown := api.List[api.CommandAction]{{Type: api.ActionUnknown, Command: text}}
	if len(cmds) != 1 || len(cmds[0]) == 0 {
		return unknown
	}
	cmd := cmds[0]
	var operands []string
	for _, a := range cmd[1:] {
		if !strings.HasPrefix(a, "-") {
			operands = append(operands, a)
		}
	}
	str := func(s string) *string { return &s }
	switch filepath.Base(cmd[0]) {
	case "cat", "head", "tail", "nl", "less", "more", "bat":
		if len(operands) == 1 {
			path := operands[0]
			if !filepath.IsAbs(path) && cwd != "" {
				path = filepath.Join(cwd, path)
			}
			return api.List[api.CommandAction]{{Type: api.ActionRead, Command: text, Name: filepath.Base(operands[0]), Path: str(path)}}
		}
	case "ls", "tree":
		a := api.CommandAction{Type: api.ActionListFiles, Command: text}
		if len(operands) == 1 {
			a.Path = str(operands[0])
		}
		if len(operands) <= 1 {
			return api.List[api.CommandAction]{a}
		}
	case "rg", "grep", "ag":
		a := api.CommandAction{Type: api.ActionSearch, Command: text}
		if len(operands) >= 1 {
			a.Query = str(operands[0])
		}
		if len(operands) == 2 {
			a.Path = str(operands[1])
		}
		if len(operands) <= 2 {
			return api.List[api.CommandAction]{a}
		}
	}
	return unknown
}

// approvalParams is the item/commandExecution/requestApproval request of
// the command item it, in the reference's shape.
func (tt *turnTools) approvalParams(it *api.CommandExecutionItem, reason string, amendment []string, decisions []policy.ReviewDecision) *api.CommandExecutionRequestApprovalParams {
	cmd, cwd, env := it.Command, it.Cwd, "local"
	p := &api.CommandExecutionRequestApprovalParams{
		Kind: api.ApprovalKindCommand, ThreadID: tt.tc.ThreadID, TurnID: tt.tc.TurnID, ItemID: it.ID,
		EnvironmentID: &env, Command: &cmd, Cwd: &cwd, CommandActions: it.CommandActions,
		ProposedExecpolicyAmendment: amendment, AvailableDecisions: policy.APIDecisions(decisions),
	}
	if reason != "" {
		p.Reason = &reason
	}
	return p
}

// completeItem completes a commandExecution item now, through the sink of
// the turn that started it.
func (s *Service) completeItem(sink turns.ToolSink, it *api.CommandExecutionItem, startedMs int64) {
	sink.ItemCompleted(s.completedItem(it, startedMs))
}

// completedItem is a commandExecution item completed now.
func (s *Service) completedItem(it *api.CommandExecutionItem, startedMs int64) api.ThreadItem {
	done := s.nowMs()
	return api.ThreadItem{Body: it, StartedAtMs: &startedMs, CompletedAtMs: &done}
}

// outputDelta streams a shell command's output as
// item/commandExecution/outputDelta (plain text).
func (tt *turnTools) outputDelta(_ context.Context, inv registry.Invocation, d shell.OutputDelta) {
	tt.tc.Sink.CommandOutputDelta(inv.CallID, string(d.Data))
}

// Run implements shell.Runner: the policy flow of shell.PolicyRunner
// (docs/tools.md §4.3), with the commandExecution item around it. Without
// an approval the item starts before the command runs; with one the
// waitingOnApproval flag goes up first, then the item starts and the
// request goes out (docs/protocol.md §8.1). A forbidden command gets no
// item.
func (tt *turnTools) Run(ctx context.Context, req shell.RunRequest) (shell.ExecResult, error) {
	s := tt.s
	it := commandItem(req.Invocation.CallID, req.Argv, req.Cwd, api.CommandSourceAgent)
	startedMs := s.nowMs()
	started := false
	start := func() {
		if !started {
			started = true
			startedMs = s.nowMs()
			tt.tc.Sink.ItemStarted(api.ThreadItem{Body: it, StartedAtMs: &startedMs})
		}
	}
	var outcome *askOutcome
	runner := &shell.PolicyRunner{
		Approval: tt.approval, SandboxPolicy: tt.sandbox, Session: tt.tc.Approvals, Sandbox: s.sandbox,
		Pool: tt.tc.ThreadID, Rules: s.rules, OnAllowPrefix: s.allowPrefix,
		Ask: func(ctx context.Context, a shell.ApprovalRequest) (policy.ReviewDecision, error) {
			outcome.settle() // a retry prompt follows an earlier one
			outcome = &askOutcome{}
			params := tt.approvalParams(it, a.Reason, a.ProposedAmendment, a.AvailableDecisions)
			d := tt.ask(ctx, "item/commandExecution/requestApproval", params, func() {
				start()
				params.StartedAtMs = startedMs
			}, outcome)
			return d, nil
		},
	}
	// Planned once: the item starts now unless an approval comes first,
	// and the command runs as this plan says.
	plan := runner.Plan(req)
	if plan.Action != policy.ActionNeedsApproval && plan.Action != policy.ActionForbidden {
		start()
	}
	res, err := runner.RunPlanned(ctx, req, plan)
	if !started {
		// Forbidden (or refused before any prompt): the model reads why.
		tt.auditRun(ctx, req, plan, outcome, nil)
		outcome.settle()
		return res, err
	}
	switch {
	case err == nil:
		code := int32(res.ExitCode)
		out := lossy.String(res.Aggregated)
		dur := res.Duration.Milliseconds()
		it.ExitCode, it.AggregatedOutput, it.DurationMs = &code, &out, &dur
		it.Status = api.StatusCompleted
		if res.ExitCode != 0 {
			it.Status = api.StatusFailed
		}
	case outcome != nil && !outcome.approved:
		// The last prompt did not let the command run.
		it.Status, err = outcome.rejection("exec command", err)
	default:
		// Interrupted while running, or the command could not start.
		it.Status = api.StatusFailed
		if res.Duration > 0 {
			out := lossy.String(res.Aggregated)
			dur := res.Duration.Milliseconds()
			it.AggregatedOutput, it.DurationMs = &out, &dur
		}
	}
	s.completeItem(tt.tc.Sink, it, startedMs)
	tt.auditRun(ctx, req, plan, outcome, it)
	if errors.Is(err, shell.ErrInterruptTurn) {
		// Interrupted first: the turn's end announces the status.
		tt.tc.Interrupt()
	}
	outcome.settle()
	return res, err
}

// commandAudit is the detail of a command's tool_call entry: the call, the
// policies it was planned under and the path of the decision.
type commandAudit struct {
	Tool           string                `json:"tool"`
	CallID         string                `json:"callId"`
	Command        []string              `json:"command"`
	Cwd            string                `json:"cwd"`
	ApprovalPolicy api.AskForApproval    `json:"approvalPolicy"`
	SandboxPolicy  api.SandboxPolicyType `json:"sandboxPolicy"`
	// Action is the plan's: skip (sandboxed, no prompt), run-unsandboxed,
	// needs-approval or forbidden.
	Action string `json:"action"`
	// Rule is the exec-policy rule (its argv prefix) that decided; absent
	// when the heuristic did.
	Rule        []string `json:"rule,omitempty"`
	Reason      string   `json:"reason,omitempty"`
	PreApproved bool     `json:"preApproved,omitempty"`
	// Sandboxed says whether the command's first run was in the sandbox.
	Sandboxed bool `json:"sandboxed"`
	// Decision is the approval's answer, when one was asked and given.
	Decision json.RawMessage `json:"decision,omitempty"`
	// Status is the item's final status, absent when the call was refused
	// before it started or runs on in an exec session; ExitCode the
	// command's.
	Status   api.ToolStatus `json:"status,omitempty"`
	ExitCode *int32         `json:"exitCode,omitempty"`
}

// newCommandAudit starts the detail of a command call's entry: the call
// and its plan. sandboxed is whether its (first) run is in the sandbox.
func (tt *turnTools) newCommandAudit(inv registry.Invocation, argv []string, cwd string, plan policy.Plan, sandboxed bool) commandAudit {
	return commandAudit{
		Tool: inv.DisplayName(), CallID: inv.CallID, Command: argv, Cwd: cwd,
		ApprovalPolicy: tt.tc.ApprovalPolicy, SandboxPolicy: tt.tc.Sandbox.Type,
		Action: plan.Action.String(), Rule: plan.Requirement.MatchedRule, Reason: plan.Reason, PreApproved: plan.PreApproved,
		Sandboxed: sandboxed && sandbox.Sandboxed(tt.sandbox),
	}
}

// auditCall records a tool call whose detail is d (a commandAudit or a
// patchAudit): the thread's principal's action, taken by the model.
func (tt *turnTools) auditCall(ctx context.Context, d any) {
	actor := audit.Actor{Principal: principal.NameOf(tt.tc.Originator)}
	tt.s.cfg.Audit.Record(ctx, audit.Entry{Kind: audit.KindToolCall, Actor: &actor, ThreadID: tt.tc.ThreadID, TurnID: tt.tc.TurnID, Detail: d})
}

// auditRun records a command run by Run; it (nil: refused before it
// started) is its completed item.
func (tt *turnTools) auditRun(ctx context.Context, req shell.RunRequest, plan policy.Plan, outcome *askOutcome, it *api.CommandExecutionItem) {
	sandboxed := plan.Action == policy.ActionSkip || plan.Action == policy.ActionNeedsApproval && plan.SandboxedAfterApproval
	d := tt.newCommandAudit(req.Invocation, req.Argv, req.Cwd, plan, sandboxed)
	if outcome != nil {
		d.Decision = outcome.decision
	}
	if it != nil {
		d.Status, d.ExitCode = it.Status, it.ExitCode
	}
	tt.auditCall(ctx, d)
}
