package policy_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
)

func add(p string) policy.FileChange    { return policy.FileChange{Kind: policy.ChangeAdd, Path: p} }
func del(p string) policy.FileChange    { return policy.FileChange{Kind: policy.ChangeDelete, Path: p} }
func update(p string) policy.FileChange { return policy.FileChange{Kind: policy.ChangeUpdate, Path: p} }
func move(p, to string) policy.FileChange {
	return policy.FileChange{Kind: policy.ChangeUpdate, Path: p, MovePath: to}
}

func TestAssessPatchMatrix(t *testing.T) {
	cwd := t.TempDir()
	ws := policy.SandboxPolicy{Kind: policy.WorkspaceWrite, ExcludeSlashTmp: true, ExcludeTmpdirEnvVar: true}
	inside := policy.Patch{Cwd: cwd, Changes: []policy.FileChange{add("new.txt"), update("src/a.go"), del("old.txt")}}
	outside := policy.Patch{Cwd: cwd, Changes: []policy.FileChange{add("new.txt"), add("../escape.txt")}}

	const (
		AA = policy.PatchAutoApprove
		AU = policy.PatchAskUser
		RJ = policy.PatchReject
	)
	type want struct {
		v         policy.PatchVerdict
		sandboxed bool
	}
	sbs := []policy.SandboxPolicy{readOnly, ws, fullAcc, external}
	cases := []struct {
		name            string
		p               policy.ApprovalPolicy
		inside, outside [4]want
	}{
		{"untrusted", untrusted,
			[4]want{{AU, false}, {AU, false}, {AU, false}, {AU, false}},
			[4]want{{AU, false}, {AU, false}, {AU, false}, {AU, false}}},
		{"on-failure", onFailure,
			[4]want{{AA, true}, {AA, true}, {AA, false}, {AA, false}},
			[4]want{{AA, true}, {AA, true}, {AA, false}, {AA, false}}},
		{"on-request", onRequest,
			[4]want{{AU, false}, {AA, true}, {AA, false}, {AA, false}},
			[4]want{{AU, false}, {AU, false}, {AA, false}, {AA, false}}},
		{"never", never,
			[4]want{{RJ, false}, {AA, true}, {AA, false}, {AA, false}},
			[4]want{{RJ, false}, {RJ, false}, {AA, false}, {AA, false}}},
		{"granular", granularAll,
			[4]want{{AU, false}, {AA, true}, {AA, false}, {AA, false}},
			[4]want{{AU, false}, {AU, false}, {AA, false}, {AA, false}}},
	}
	for _, c := range cases {
		for i, sb := range sbs {
			roots := sb.WritableRootsWithCwd(cwd)
			for _, pc := range []struct {
				label string
				patch policy.Patch
				w     want
			}{{"inside", inside, c.inside[i]}, {"outside", outside, c.outside[i]}} {
				got := policy.AssessPatch(pc.patch, roots, sb, c.p)
				name := fmt.Sprintf("%s/%s/%s", c.name, sb.Mode(), pc.label)
				assert.Equal(t, pc.w.v, got.Verdict, name)
				assert.Equal(t, pc.w.sandboxed, got.Sandboxed, name)
				if got.Verdict == RJ {
					assert.Equal(t, "it writes outside the writable roots, and the approval policy lets no one approve that", got.Reason, name)
					assert.Equal(t, "patch rejected: it writes outside the writable roots, and the approval policy lets no one approve that", got.ModelMessage())
				} else {
					assert.Empty(t, got.ModelMessage())
				}
			}
		}
	}
}

func TestAssessPatchPaths(t *testing.T) {
	cwd := t.TempDir()
	extra := t.TempDir()
	mkdir(t, filepath.Join(cwd, ".git"))
	ws := policy.SandboxPolicy{Kind: policy.WorkspaceWrite, WritableRoots: []string{extra}, ExcludeSlashTmp: true, ExcludeTmpdirEnvVar: true}
	roots := ws.WritableRootsWithCwd(cwd)
	cases := []struct {
		name    string
		changes []policy.FileChange
		auto    bool
	}{
		{"relative inside", []policy.FileChange{add("a/b.txt")}, true},
		{"absolute inside", []policy.FileChange{update(filepath.Join(cwd, "x.go"))}, true},
		{"extra writable root", []policy.FileChange{add(filepath.Join(extra, "y"))}, true},
		{"dot-dot escape", []policy.FileChange{add("a/../../b")}, false},
		{"dot-dot staying inside", []policy.FileChange{add("a/../b")}, true},
		{"move destination outside", []policy.FileChange{move("a.txt", "../a.txt")}, false},
		{"move source outside", []policy.FileChange{move("../a.txt", "a.txt")}, false},
		{"move inside", []policy.FileChange{move("a.txt", "b/a.txt")}, true},
		{"delete outside", []policy.FileChange{del("/etc/hosts")}, false},
		{"protected .git", []policy.FileChange{update(".git/config")}, false},
		{"protected missing .codex", []policy.FileChange{add(".codex/config.toml")}, false},
		{"one bad change spoils the patch", []policy.FileChange{add("ok"), add("/tmp/../etc/x")}, false},
	}
	for _, c := range cases {
		got := policy.AssessPatch(policy.Patch{Cwd: cwd, Changes: c.changes}, roots, ws, onRequest)
		if c.auto {
			assert.Equal(t, policy.PatchAutoApprove, got.Verdict, c.name)
			assert.True(t, got.Sandboxed, c.name)
		} else {
			assert.Equal(t, policy.PatchAskUser, got.Verdict, c.name)
		}
	}
	empty := policy.AssessPatch(policy.Patch{Cwd: cwd}, roots, ws, onRequest)
	assert.Equal(t, policy.PatchAssessment{Verdict: policy.PatchReject, Reason: "empty patch"}, empty)
	assert.Equal(t, "patch rejected: empty patch", empty.ModelMessage())
	assert.Equal(t, policy.PatchReject, policy.AssessPatch(policy.Patch{Cwd: cwd}, nil, fullAcc, untrusted).Verdict, "empty beats untrusted")
}

func TestPlanPatch(t *testing.T) {
	cwd := t.TempDir()
	other := t.TempDir()
	ws := policy.SandboxPolicy{Kind: policy.WorkspaceWrite, ExcludeSlashTmp: true, ExcludeTmpdirEnvVar: true}
	inside := policy.Patch{Cwd: cwd, Changes: []policy.FileChange{add("a.txt")}}
	out := policy.Patch{Cwd: cwd, Changes: []policy.FileChange{add(filepath.Join(other, "b.txt")), update("a.txt")}}

	assert.Equal(t, policy.ActionSkip, policy.PlanPatch(inside, onRequest, ws, nil).Action)
	assert.Equal(t, policy.ActionRunUnsandboxed, policy.PlanPatch(out, onRequest, fullAcc, nil).Action)

	rej := policy.PlanPatch(out, never, ws, nil)
	assert.Equal(t, policy.ActionForbidden, rej.Action)
	assert.Equal(t, "patch rejected: it writes outside the writable roots, and the approval policy lets no one approve that", rej.Reason)

	session := policy.NewSessionApprovals()
	ask := policy.PlanPatch(out, onRequest, ws, session)
	require.Equal(t, policy.ActionNeedsApproval, ask.Action)
	assert.True(t, ask.SandboxedAfterApproval)
	assert.Equal(t, policy.PatchAvailableDecisions(), ask.AvailableDecisions)
	assert.Equal(t, []string{"patch:" + filepath.Join(other, "b.txt"), "patch:" + filepath.Join(cwd, "a.txt")}, ask.ApprovalKeys)
	assert.Equal(t, policy.Outcome{Message: "patch rejected by user"}, policy.Resolve(ask, policy.ReviewDecision{Kind: policy.Decline}, session))
	assert.Equal(t, policy.Outcome{Message: "patch rejected by user", InterruptTurn: true}, policy.Resolve(ask, policy.ReviewDecision{Kind: policy.Cancel}, session))
	assert.Equal(t, policy.Outcome{Run: true, Sandboxed: true}, policy.Resolve(ask, policy.ReviewDecision{Kind: policy.AcceptForSession}, session))

	// The same files, or a subset, are now approved for the session.
	again := policy.PlanPatch(policy.Patch{Cwd: cwd, Changes: []policy.FileChange{update(filepath.Join(other, "b.txt"))}}, onRequest, ws, session)
	assert.Equal(t, policy.ActionSkip, again.Action)
	assert.True(t, again.PreApproved)
	assert.Equal(t, policy.RetryRerunUnsandboxed, policy.PlanRetry(again, false, session).Action)
	newFile := policy.PlanPatch(policy.Patch{Cwd: cwd, Changes: []policy.FileChange{add(filepath.Join(other, "c.txt"))}}, onRequest, ws, session)
	assert.Equal(t, policy.ActionNeedsApproval, newFile.Action)

	// Untrusted always asks, even inside the workspace; acceptForSession covers the file.
	fresh := policy.Patch{Cwd: cwd, Changes: []policy.FileChange{add("fresh.txt")}}
	u := policy.PlanPatch(fresh, untrusted, ws, session)
	require.Equal(t, policy.ActionNeedsApproval, u.Action)
	policy.Resolve(u, policy.ReviewDecision{Kind: policy.AcceptForSession}, session)
	assert.Equal(t, policy.ActionSkip, policy.PlanPatch(fresh, untrusted, ws, session).Action)

	// A root granted for the session makes writes under it auto-approved.
	granted := policy.NewSessionApprovals()
	granted.GrantRoot(other)
	granted.GrantRoot("relative/ignored")
	assert.Equal(t, []string{other}, granted.GrantedRoots())
	assert.Equal(t, policy.ActionSkip, policy.PlanPatch(out, onRequest, ws, granted).Action)
	assert.Equal(t, policy.ActionNeedsApproval, policy.PlanPatch(out, onRequest, readOnly, granted).Action, "read-only never writes")
}
