package orchestrate

import (
	"context"
	"errors"
	"path/filepath"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/lossy"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
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
	done := s.nowMs()
	sink.ItemCompleted(api.ThreadItem{Body: it, StartedAtMs: &startedMs, CompletedAtMs: &done})
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
	plan := policy.PlanExec(policy.ExecRequest{
		Command: req.Argv, Cwd: req.Cwd, Approval: tt.approval, Sandbox: tt.sandbox,
		Escalation: req.Escalation, Rules: s.rules, Session: tt.tc.Approvals,
	})
	if plan.Action != policy.ActionNeedsApproval && plan.Action != policy.ActionForbidden {
		start()
	}
	var outcome *askOutcome
	runner := &shell.PolicyRunner{
		Approval: tt.approval, SandboxPolicy: tt.sandbox, Session: tt.tc.Approvals, Sandbox: s.sandbox,
		Rules: s.rules, OnAllowPrefix: s.allowPrefix,
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
	res, err := runner.Run(ctx, req)
	if !started {
		// Forbidden (or refused before any prompt): the model reads why.
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
	if errors.Is(err, shell.ErrInterruptTurn) {
		// Interrupted first: the turn's end announces the status.
		tt.tc.Interrupt()
	}
	outcome.settle()
	return res, err
}
