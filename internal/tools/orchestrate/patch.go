package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/tools/applypatch"
	"github.com/appserver/appserver/internal/tools/shell"
)

// patchCall is the fileChange item of one apply_patch call.
type patchCall struct {
	item      *api.FileChangeItem
	startedMs int64
	// audit is the call's audit detail, completed when the patch ends.
	audit patchAudit
}

// access is what the thread's own tools may reach (fsguard.ForThread):
// where its sandbox lets commands write, the cwd under read-only (patches
// there ask first), everything under full access; plus the roots granted
// for the session. The roots come from the turn's cwd, never from a
// directory the model names (a shell call's workdir, `cd dir &&
// apply_patch`), which would otherwise become writable.
func (tt *turnTools) access(registry.Invocation) fsguard.Access {
	return fsguard.ForThread(tt.sandbox, tt.tc.Cwd, tt.tc.Approvals.GrantedRoots())
}

func fileChanges(plan *applypatch.Plan) api.List[api.FileUpdateChange] {
	out := api.List[api.FileUpdateChange]{}
	for _, c := range plan.Changes() {
		fc := api.FileUpdateChange{Path: c.Path, Diff: c.Diff, Kind: api.PatchChangeKind{Type: api.PatchChangeKindType(c.Kind.Type), MovePath: c.Kind.MovePath}}
		out = append(out, fc)
	}
	return out
}

// policyPatch is the patch as policy decides on it: its paths absolute
// (resolved against the directory the patch ran in), and the turn's cwd
// as the one the sandbox's writable roots are computed for.
func (tt *turnTools) policyPatch(plan *applypatch.Plan) policy.Patch {
	p := policy.Patch{Cwd: tt.tc.Cwd}
	for _, h := range plan.Patch().Hunks {
		fc := policy.FileChange{Path: policy.ResolvePath(plan.Cwd(), h.Path)}
		if h.MovePath != "" {
			fc.MovePath = policy.ResolvePath(plan.Cwd(), h.MovePath)
		}
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
	pp := tt.policyPatch(plan)
	pl := policy.PlanPatch(pp, tt.approval, tt.sandbox, tt.tc.Approvals)
	ad := tt.newPatchAudit(inv, pp, pl)
	if pl.Action == policy.ActionForbidden {
		tt.auditCall(ctx, ad)
		return errors.New(pl.Reason)
	}
	pc := &patchCall{item: &api.FileChangeItem{ID: inv.CallID, Changes: fileChanges(plan), Status: api.StatusInProgress}, startedMs: tt.s.nowMs(), audit: ad}
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
	pc.audit.Decision = out.decision
	if res.Run {
		out.settle()
		return nil
	}
	var err error
	pc.item.Status, err = out.rejection("patch", errors.New(res.Message))
	pc.audit.Status = pc.item.Status
	tt.auditCall(ctx, pc.audit)
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
func (tt *turnTools) patchFinished(ctx context.Context, inv registry.Invocation, plan *applypatch.Plan, _ applypatch.Result, err error) {
	tt.mu.Lock()
	pc := tt.patches[inv.CallID]
	tt.mu.Unlock()
	if pc != nil {
		pc.item.Status = api.StatusCompleted
		if err != nil {
			pc.item.Status = api.StatusFailed
		}
		pc.audit.Status = pc.item.Status
		tt.auditCall(ctx, pc.audit)
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
		patch = heredocBody(strings.TrimSpace(rest))
	}
	call := inv
	call.Payload = registry.CustomPayload{Input: patch}
	call.Turn.Cwd = cwd
	out, err := tt.interceptPatch.Handle(ctx, call)
	return out, true, err
}

// patchAudit is the detail of a patch's tool_call entry: the files it
// changes, the policies it was planned under and the path of the
// decision. The daemon writes a patch itself (within the thread's
// writable roots), never in the sandbox.
type patchAudit struct {
	Tool           string                `json:"tool"`
	CallID         string                `json:"callId"`
	Changes        []patchChange         `json:"changes"`
	ApprovalPolicy api.AskForApproval    `json:"approvalPolicy"`
	SandboxPolicy  api.SandboxPolicyType `json:"sandboxPolicy"`
	Action         string                `json:"action"`
	Reason         string                `json:"reason,omitempty"`
	PreApproved    bool                  `json:"preApproved,omitempty"`
	Decision       json.RawMessage       `json:"decision,omitempty"`
	Status         api.ToolStatus        `json:"status,omitempty"`
}

// patchChange is one file a patch changes.
type patchChange struct {
	Kind     string `json:"kind"`
	Path     string `json:"path"`
	MovePath string `json:"movePath,omitempty"`
}

func (tt *turnTools) newPatchAudit(inv registry.Invocation, p policy.Patch, pl policy.Plan) patchAudit {
	d := patchAudit{
		Tool: inv.DisplayName(), CallID: inv.CallID, ApprovalPolicy: tt.tc.ApprovalPolicy, SandboxPolicy: tt.tc.Sandbox.Type,
		Action: pl.Action.String(), Reason: pl.Reason, PreApproved: pl.PreApproved,
	}
	for _, c := range p.Changes {
		kind := "update"
		switch c.Kind {
		case policy.ChangeAdd:
			kind = "add"
		case policy.ChangeDelete:
			kind = "delete"
		}
		d.Changes = append(d.Changes, patchChange{Kind: kind, Path: c.Path, MovePath: c.MovePath})
	}
	return d
}

// heredocBody is the body of a `<<DELIM` … `DELIM` heredoc (the
// delimiter bare or quoted, any word, as a shell reads it), or text as it
// is when it is not one whole heredoc: the patch parser then strips the
// `EOF` wrappers it knows, or reports the patch invalid.
func heredocBody(text string) string {
	head, body, ok := strings.Cut(text, "\n")
	if !ok {
		return text
	}
	delim := strings.TrimSpace(strings.TrimPrefix(head, "<<"))
	delim = strings.TrimPrefix(delim, "-")
	if n := len(delim); n >= 2 && (delim[0] == '\'' || delim[0] == '"') && delim[n-1] == delim[0] {
		delim = delim[1 : n-1]
	}
	if delim == "" || strings.ContainsAny(delim, " \t'\"<>|&;") {
		return text
	}
	body, ok = strings.CutSuffix(body, "\n"+delim)
	if !ok {
		return text
	}
	return body
}
