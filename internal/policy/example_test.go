package policy_test

import (
	"fmt"
	"testing"

	"github.com/appserver/appserver/internal/policy"
)

// ExamplePlanExec walks one command through the approval flow: plan, ask,
// resolve the client's answer, and what a sandbox denial leads to.
func ExamplePlanExec() {
	session := policy.NewSessionApprovals()
	req := policy.ExecRequest{
		Command:  []string{"bash", "-lc", "cargo build && ls"},
		Cwd:      "/srv/project",
		Approval: policy.ApprovalPolicy{Mode: policy.Untrusted},
		Sandbox:  policy.SandboxPolicy{Kind: policy.WorkspaceWrite},
		Session:  session,
	}
	plan := policy.PlanExec(req)
	fmt.Println(plan.Action, plan.ProposedAmendment)

	out := policy.Resolve(plan, policy.ReviewDecision{Kind: policy.AcceptForSession}, session)
	fmt.Println(out.Run, out.Sandboxed)

	// The sandboxed run failed with a denial; the user already approved it.
	if policy.IsSandboxDenial(policy.SandboxRun{Sandboxed: true, ExitCode: 1, Stderr: "Read-only file system"}) {
		fmt.Println(policy.PlanRetry(plan, true, session).Action == policy.RetryRerunUnsandboxed)
	}
	fmt.Println(policy.PlanExec(req).Action)
	// Output:
	// needs-approval [cargo build]
	// true true
	// true
	// skip
}

// ExampleAssessPatch shows the patch rules under the never policy.
func ExampleAssessPatch() {
	sandbox := policy.SandboxPolicy{Kind: policy.WorkspaceWrite, ExcludeSlashTmp: true, ExcludeTmpdirEnvVar: true}
	roots := []policy.WritableRoot{{Root: "/srv/project"}}
	never := policy.ApprovalPolicy{Mode: policy.Never}
	inside := policy.Patch{Cwd: "/srv/project", Changes: []policy.FileChange{{Kind: policy.ChangeAdd, Path: "notes.md"}}}
	outside := policy.Patch{Cwd: "/srv/project", Changes: []policy.FileChange{{Kind: policy.ChangeAdd, Path: "../other/notes.md"}}}
	fmt.Println(policy.AssessPatch(inside, roots, sandbox, never).Verdict == policy.PatchAutoApprove)
	fmt.Println(policy.AssessPatch(outside, roots, sandbox, never).ModelMessage())
	// Output:
	// true
	// patch rejected: it writes outside the writable roots, and the approval policy lets no one approve that
}

// BenchmarkPlanExec measures the policy part of a tool call's overhead.
func BenchmarkPlanExec(b *testing.B) {
	rules, err := policy.ParseRules("b.rules", `prefix_rule(pattern=["git", "push"], decision="forbidden")`)
	if err != nil {
		b.Fatal(err)
	}
	req := policy.ExecRequest{
		Command: []string{"bash", "-lc", "git status && rg -n 'foo bar' src | head -n 20"}, Cwd: "/w",
		Approval: policy.ApprovalPolicy{Mode: policy.OnRequest}, Sandbox: policy.SandboxPolicy{Kind: policy.WorkspaceWrite},
		Rules: rules, Session: policy.NewSessionApprovals(),
	}
	for b.Loop() {
		_ = policy.PlanExec(req)
	}
}
