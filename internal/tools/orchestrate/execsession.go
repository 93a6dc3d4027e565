package orchestrate

import (
	"context"
	"errors"
	"strconv"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/sandbox"
	"github.com/appserver/appserver/internal/tools/execsession"
	"github.com/appserver/appserver/internal/turns"
)

// execItem is the commandExecution item of an exec_command session: it
// starts at the approval request or when the process is spawned, and
// completes when the process ends (possibly after the call returned).
type execItem struct {
	// sink is the sink of the turn that started the session; the item
	// ends there even when the process outlives that turn.
	sink      turns.ToolSink
	item      *api.CommandExecutionItem
	startedMs int64
	started   bool
	spawned   bool
}

func execKey(threadID, callID string) string { return threadID + "\x00" + callID }

// execTool wraps the exec session handler to settle the item of a call
// whose process never started.
type execTool struct {
	*execsession.Handler
	tt *turnTools
}

// Handle runs the call, then completes an item left without a process.
func (e *execTool) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	out, err := e.Handler.Handle(ctx, inv)
	if inv.Name == execsession.ExecCommandName {
		s := e.tt.s
		key := execKey(e.tt.tc.ThreadID, inv.CallID)
		s.mu.Lock()
		ei := s.execItems[key]
		if ei != nil && !ei.spawned {
			delete(s.execItems, key)
		} else {
			ei = nil
		}
		s.mu.Unlock()
		if ei != nil && ei.started {
			ei.item.Status = api.StatusFailed
			s.completeItem(ei.sink, ei.item, ei.startedMs)
		}
	}
	return out, err
}

// execPrepare applies the approval and sandbox policies to an
// exec_command call before its process is spawned.
func (tt *turnTools) execPrepare(ctx context.Context, inv registry.Invocation, args execsession.ExecArgs, req *execsession.ExecRequest) (*registry.Output, error) {
	s := tt.s
	// An apply_patch heredoc goes through the patch engine (its own
	// approval, a fileChange item), as the shell tools do: models with
	// exec_command and no apply_patch tool edit files this way.
	if out, handled, err := tt.interceptApplyPatch(ctx, inv, req.Argv, req.Cwd); handled || err != nil {
		if err != nil {
			return nil, err
		}
		return &out, nil
	}
	esc, err := policy.EscalationFromArgs(args.SandboxPermissions, nil, args.Justification, args.PrefixRule)
	if err != nil {
		return nil, registry.ArgumentsError(err)
	}
	plan := policy.PlanExec(policy.ExecRequest{
		Command: req.Argv, Cwd: req.Cwd, Approval: tt.approval, Sandbox: tt.sandbox,
		Escalation: esc, Rules: s.rules, Session: tt.tc.Approvals,
	})
	if plan.Action == policy.ActionForbidden {
		tt.auditCall(ctx, tt.newCommandAudit(inv, req.Argv, req.Cwd, plan, false))
		return nil, errors.New(plan.Reason)
	}
	ei := &execItem{
		sink: tt.tc.Sink, item: commandItem(inv.CallID, req.Argv, req.Cwd, api.CommandSourceAgent), startedMs: s.nowMs(),
	}
	sandboxed := plan.Action == policy.ActionSkip
	if plan.Action == policy.ActionNeedsApproval {
		out := &askOutcome{}
		params := tt.approvalParams(ei.item, plan.Reason, plan.ProposedAmendment, plan.AvailableDecisions)
		d := tt.ask(ctx, "item/commandExecution/requestApproval", params, func() {
			ei.started, ei.startedMs = true, s.nowMs()
			params.StartedAtMs = ei.startedMs
			tt.tc.Sink.ItemStarted(api.ThreadItem{Body: ei.item, StartedAtMs: &ei.startedMs})
		}, out)
		res := policy.Resolve(plan, d, tt.tc.Approvals)
		if len(res.PersistAllowPrefix) > 0 {
			s.allowPrefix(res.PersistAllowPrefix)
		}
		if !res.Run {
			var err error
			ei.item.Status, err = out.rejection("exec command", errors.New(res.Message))
			refused := tt.newCommandAudit(inv, req.Argv, req.Cwd, plan, false)
			refused.Decision, refused.Status = out.decision, ei.item.Status
			tt.auditCall(ctx, refused)
			s.completeItem(ei.sink, ei.item, ei.startedMs)
			if res.InterruptTurn {
				tt.tc.Interrupt()
			}
			out.settle()
			return nil, err
		}
		out.settle()
		sandboxed = res.Sandboxed
		ran := tt.newCommandAudit(inv, req.Argv, req.Cwd, plan, sandboxed)
		ran.Decision = out.decision
		tt.auditCall(ctx, ran)
	} else {
		tt.auditCall(ctx, tt.newCommandAudit(inv, req.Argv, req.Cwd, plan, sandboxed))
	}
	pol := tt.sandbox
	if !sandboxed || !sandbox.Sandboxed(pol) {
		pol = policy.SandboxPolicy{Kind: policy.DangerFullAccess}
	}
	sb := s.sandbox
	env := s.commandEnv()
	turnCwd, cwd, thread := tt.tc.Cwd, req.Cwd, tt.tc.ThreadID
	snap := s.snapshots.For(tt.tc.Originator, pol)
	req.Env = env
	req.Command = func(argv []string) (*sandbox.Cmd, error) {
		// The session outlives this call: the Manager, not a context,
		// ends the process.
		wrapped := snap.Wrap(context.Background(), argv)
		return sb.CommandFor(context.Background(), sandbox.Request{Policy: pol, PolicyCwd: turnCwd, Cwd: cwd, Argv: wrapped, Env: env, Pool: thread,
			Prelude: snap.Prelude(argv, wrapped)})
	}
	s.mu.Lock()
	s.execItems[execKey(tt.tc.ThreadID, inv.CallID)] = ei
	s.mu.Unlock()
	return nil, nil
}

// execObserver follows the exec sessions of every thread
// (execsession.Observer) to run the life cycle of their items.
type execObserver struct{ s *Service }

func (o execObserver) item(info execsession.SessionInfo) *execItem {
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	return o.s.execItems[execKey(info.ThreadID, info.CallID)]
}

// SessionStarted starts the item now, unless an approval request started
// it already.
func (o execObserver) SessionStarted(info execsession.SessionInfo) {
	s := o.s
	s.mu.Lock()
	ei := s.execItems[execKey(info.ThreadID, info.CallID)]
	if ei == nil {
		s.mu.Unlock()
		return
	}
	ei.spawned = true
	pid := strconv.Itoa(info.ID)
	ei.item.ProcessID, ei.item.Source = &pid, api.CommandSourceUnifiedExecStartup
	start := !ei.started
	ei.started = true
	if start {
		ei.startedMs = info.StartedAt.UnixMilli()
	}
	item := *ei.item
	startedMs := ei.startedMs
	s.mu.Unlock()
	if start {
		ei.sink.ItemStarted(api.ThreadItem{Body: &item, StartedAtMs: &startedMs})
	}
}

// SessionOutput streams the output as item/commandExecution/outputDelta.
func (o execObserver) SessionOutput(info execsession.SessionInfo, chunk []byte) {
	ei := o.item(info)
	if ei == nil {
		return
	}
	ei.sink.CommandOutputDelta(info.CallID, string(chunk))
}

// SessionEnded completes the item with the process's exit code and
// transcript.
func (o execObserver) SessionEnded(info execsession.SessionInfo, end execsession.SessionEnd) {
	s := o.s
	key := execKey(info.ThreadID, info.CallID)
	s.mu.Lock()
	ei := s.execItems[key]
	delete(s.execItems, key)
	s.mu.Unlock()
	if ei == nil {
		return
	}
	code := int32(end.ExitCode)
	dur := end.Duration.Milliseconds()
	out := end.Transcript
	ei.item.ExitCode, ei.item.DurationMs, ei.item.AggregatedOutput = &code, &dur, &out
	ei.item.Status = api.StatusCompleted
	if end.ExitCode != 0 {
		ei.item.Status = api.StatusFailed
	}
	// Nothing of the call follows the item (the Manager waits for this
	// before it answers the call), so it is completed as final: the turn
	// defers it into its round's commit, instead of a commit of its own
	// on the way from the exit to the call's answer, while that round
	// runs and this is its last open call; a session that ends during a
	// later call, or after its round, has its item committed on its own.
	ei.sink.ItemCompletedFinal(s.completedItem(ei.item, ei.startedMs))
}
