package orchestrate

import (
	"context"
	"errors"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/tools/applypatch"
	"github.com/appserver/appserver/internal/tools/shell"
)

// patchCall is the fileChange item of one apply_patch call.
type patchCall struct {
	item      *api.FileChangeItem
	startedMs int64
}

// patchRoots confines patches to where the sandbox lets them write: the
// writable roots of workspace-write, the cwd under read-only (such patches
// ask first), everything under full access; plus roots granted for the
// session.
func (tt *turnTools) patchRoots(inv registry.Invocation) []string {
	cwd := inv.Turn.Cwd
	var roots []string
	switch tt.sandbox.Kind {
	case policy.DangerFullAccess, policy.ExternalSandbox:
		return []string{"/"}
	case policy.WorkspaceWrite:
		for _, r := range tt.sandbox.WritableRootsWithCwd(cwd) {
			roots = append(roots, r.Root)
		}
	default:
		roots = []string{cwd}
	}
	return append(roots, tt.tc.Approvals.GrantedRoots()...)
}

func fileChanges(plan *applypatch.Plan) api.List[api.FileUpdateChange] {
	out := api.List[api.FileUpdateChange]{}
	for _, c := range plan.Changes() {
		fc := api.FileUpdateChange{Path: c.Path, Diff: c.Diff, Kind: api.PatchChangeKind{Type: api.PatchChangeKindType(c.Kind.Type), MovePath: c.Kind.MovePath}}
		out = append(out, fc)
	}
	return out
}

func policyPatch(plan *applypatch.Plan) policy.Patch {
	p := policy.Patch{Cwd: plan.Cwd()}
	for _, h := range plan.Patch().Hunks {
		fc := policy.FileChange{Path: h.Path, MovePath: h.MovePath}
		switch h.Kind {
		case applypatch.AddFile:
			fc.Kind = policy.ChangeAdd
		case applypatch.DeleteFile:
			fc.Kind = policy.ChangeDelete
		default:
			fc.Kind = policy.ChangeUpdate
		}
		p.Changes = append(p.Changes, fc)
	}
	return p
}

// patchPlanned runs once a patch is verified and before it is written:
// policy.PlanPatch decides; a rejected patch answers the model without an
// item; otherwise the fileChange item starts, and when an approval is
// needed the flag goes up and item/fileChange/requestApproval goes out
// (docs/protocol.md §7.2, §8.1).
func (tt *turnTools) patchPlanned(ctx context.Context, inv registry.Invocation, plan *applypatch.Plan) error {
	pl := policy.PlanPatch(policyPatch(plan), tt.approval, tt.sandbox, tt.tc.Approvals)
	if pl.Action == policy.ActionForbidden {
		return errors.New(pl.Reason)
	}
	pc := &patchCall{item: &api.FileChangeItem{ID: inv.CallID, Changes: fileChanges(plan), Status: api.StatusInProgress}, startedMs: tt.s.nowMs()}
	tt.mu.Lock()
	tt.patches[inv.CallID] = pc
	tt.mu.Unlock()
	tt.tc.Sink.ItemStarted(api.ThreadItem{Body: pc.item, StartedAtMs: &pc.startedMs})
	if pl.Action != policy.ActionNeedsApproval {
		return nil
	}
	out := &askOutcome{}
	d := tt.ask(ctx, "item/fileChange/requestApproval", api.FileChangeRequestApprovalParams{
		ThreadID: tt.tc.ThreadID, TurnID: tt.tc.TurnID, ItemID: inv.CallID, StartedAtMs: tt.s.nowMs(),
	}, nil, out)
	res := policy.Resolve(pl, d, tt.tc.Approvals)
	if res.Run {
		out.settle()
		return nil
	}
	var err error
	pc.item.Status, err = out.rejection("patch", errors.New(res.Message))
	tt.completePatch(inv.CallID)
	if res.InterruptTurn {
		tt.tc.Interrupt()
	}
	out.settle()
	return err
}

func (tt *turnTools) completePatch(callID string) {
	tt.mu.Lock()
	pc := tt.patches[callID]
	delete(tt.patches, callID)
	tt.mu.Unlock()
	if pc == nil {
		return
	}
	done := tt.s.nowMs()
	tt.tc.Sink.ItemCompleted(api.ThreadItem{Body: pc.item, StartedAtMs: &pc.startedMs, CompletedAtMs: &done})
}

// patchFinished completes the fileChange item and, for an applied patch,
// announces the turn's aggregate diff (after item/completed, as the
// reference does).
func (tt *turnTools) patchFinished(_ context.Context, inv registry.Invocation, plan *applypatch.Plan, _ applypatch.Result, err error) {
	tt.mu.Lock()
	pc := tt.patches[inv.CallID]
	tt.mu.Unlock()
	if pc != nil {
		pc.item.Status = api.StatusCompleted
		if err != nil {
			pc.item.Status = api.StatusFailed
		}
	}
	tt.completePatch(inv.CallID)
	if err == nil {
		tt.tracker.Track(plan)
		tt.tc.Sink.TurnDiff(tt.tracker.Diff())
	}
}

// interceptApplyPatch runs `apply_patch <patch>` argv calls, and bash -lc
// scripts that are only an apply_patch heredoc (optionally after
// `cd <dir> &&`), through the patch engine, as docs/tools.md §2.2 asks.
func (tt *turnTools) interceptApplyPatch(ctx context.Context, inv registry.Invocation, argv []string, cwd string) (registry.Output, bool, error) {
	var patch string
	switch {
	case len(argv) == 2 && (argv[0] == "apply_patch" || argv[0] == "applypatch"):
		patch = argv[1]
	default:
		script, ok := policy.ShellScript(argv)
		if !ok {
			return registry.Output{}, false, nil
		}
		script = strings.TrimSpace(script)
		if dir, rest, found := strings.Cut(script, "&&"); found && strings.HasPrefix(strings.TrimSpace(dir), "cd ") {
			d := strings.Trim(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(dir), "cd ")), `'"`)
			cwd = shell.ResolveWorkdir(cwd, d)
			script = strings.TrimSpace(rest)
		}
		rest, ok := strings.CutPrefix(script, "apply_patch ")
		if !ok || !strings.HasPrefix(strings.TrimSpace(rest), "<<") {
			return registry.Output{}, false, nil
		}
		patch = strings.TrimSpace(rest)
	}
	call := inv
	call.Payload = registry.CustomPayload{Input: patch}
	call.Turn.Cwd = cwd
	out, err := tt.interceptPatch.Handle(ctx, call)
	return out, true, err
}
